/**
 * Stage 1b, wake: the wake job of a run parked on a wait (sleeping | waiting_event) ends the wait
 * before the step decides. A sleep not yet due (a job early: re-created by the sweep, say) and an event
 * wait with neither a delivery nor its timeout are delayed again until the wait's time (DelayedError).
 * An event wait is settled on its key by one compare-and-set (settleEventWait-1.lua: the delivery or the
 * timeout, never both), then wakeRun-5.lua makes the run running again with the wait's result journalled
 * as the waiting call's observation. If the process dies between the two, the redelivered job settles
 * again and gets the same answer; after wakeRun, it finds the run running and goes on.
 */
import { DelayedError } from 'bullmq';
import { encodeEntry, type ObservationEntry } from '../../core/journal.js';
import { waitIdOf, type WaitRecord } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import { grown, type StepState } from './state.js';

export async function wake(env: StepEnv, state: StepState, wait: WaitRecord): Promise<void> {
  const now = env.now();
  const result = wait.kind === 'sleep' ? (now >= wait.at ? 'woke' : 'early') : await settle(env, state, wait, now);
  if (result === 'early') {
    await state.job.delay(wait.at);
    state.log.info({ code: 'wake_early', kind: wait.kind, at: wait.at }, 'wake job early: delayed to the wait');
    throw new DelayedError();
  }
  const entry = result === 'woke' ? undefined : result;
  const encoded = entry ? encodeEntry(entry) : '';
  const bytes = Buffer.byteLength(encoded);
  const woke = await env.store.wake(state.job, {
    runId: state.runId,
    step: state.step,
    entry,
    encoded,
    contextBytesDelta: state.used.contextBytes === undefined ? undefined : bytes,
    event: JSON.stringify({ step: state.step, kind: wait.kind, at: wait.at, lateMs: now - wait.at }),
    now,
  });
  if (!woke) return;
  // The state was read before the wake: the journalled result grows the transcript's byte count.
  if (entry) state.used = grown(state.used, bytes);
  const outcome = wait.kind === 'sleep' ? 'woke' : isTimeout(entry) ? 'timed_out' : 'delivered';
  env.metrics.waits.inc({ kind: wait.kind, outcome });
  state.log.info({ code: 'run_woke', kind: wait.kind, outcome, lateMs: now - wait.at }, 'run woke from its wait');
  // Parked, the run gave its flow-control slot back: it takes one again, as a resumed run does.
  const { tenant, agent } = state.spec;
  await env.admission
    ?.hold?.({ runId: state.runId, tenant, agent }, now)
    .catch((err: unknown) => state.log.warn({ code: 'flow_hold_failed', err }, 'slot not taken on wake'));
}

/** An event wait's result as the waiting call's observation, or `early` while it still runs. */
async function settle(
  env: StepEnv,
  state: StepState,
  wait: Extract<WaitRecord, { kind: 'event' }>,
  now: number,
): Promise<ObservationEntry | 'early'> {
  const waitId = waitIdOf(state.runId, wait);
  const r = await env.store.settleEventWait({ tenant: state.spec.tenant, key: wait.key, waitId, at: wait.at, now });
  if (r.kind === 'early') return 'early';
  const base = { v: 1 as const, kind: 'observation' as const, step: wait.step, callId: wait.callId, tool: wait.tool };
  if (r.kind === 'timed_out') return { ...base, status: 'ok', output: { timedOut: true } };
  return { ...base, status: 'ok', output: { event: JSON.parse(r.payload) as unknown } };
}

function isTimeout(entry: ObservationEntry | undefined): boolean {
  return (entry?.output as { timedOut?: boolean } | undefined)?.timedOut === true;
}
