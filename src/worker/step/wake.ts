/**
 * Stage 1b, wake: the wake job of a run parked on a wait (sleeping | waiting_event) ends the wait
 * before the step decides. A sleep not yet due (a job early: re-created by the sweep, say) and an event
 * wait with neither a delivery nor its timeout are delayed again until the wait's time (DelayedError).
 * An event wait is settled on its key by one compare-and-set (settleEventWait-1.lua: the delivery or the
 * timeout, never both), then wakeRun-5.lua makes the run running again with the wait's result journalled
 * as the waiting call's observation. If the process dies between the two, the redelivered job settles
 * again and gets the same answer; after wakeRun, it finds the run running and goes on. A child wait reads the
 * child's run (ended, or still at work before this run's deadline: delayed again); wakeRun-5.lua journals the
 * child's outcome and charges its spend to this run in one change, so the charge and the resume happen once.
 */
import { DelayedError } from 'bullmq';
import { encodeEntry, type ObservationEntry } from '../../core/journal.js';
import { waitIdOf, type WaitRecord } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import { grown, type StepState } from './state.js';
import { InvariantError } from '../../core/errors.js';

export async function wake(env: StepEnv, state: StepState, wait: WaitRecord): Promise<void> {
  const now = env.now();
  let charge: ChildCharge | undefined;
  let result: ObservationEntry | 'woke' | 'early';
  if (wait.kind === 'sleep') result = now >= wait.at ? 'woke' : 'early';
  else if (wait.kind === 'event') result = await settle(env, state, wait, now);
  else {
    const child = await settleChild(env, wait, now);
    result = child === 'early' ? child : child.entry;
    if (child !== 'early') charge = child.charge;
  }
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
    event: JSON.stringify({
      step: state.step,
      kind: wait.kind,
      at: wait.at,
      lateMs: now - wait.at,
      ...(wait.kind === 'child' ? { childRunId: wait.childRunId, childStatus: charge?.status } : {}),
    }),
    now,
    ...(charge ? { charge: { steps: charge.steps, tokens: charge.tokens } } : {}),
  });
  if (!woke) return;
  // The state was read before the wake: the journalled result grows the transcript's byte count, a child's spend
  // its budget.
  if (entry) state.used = grown(state.used, bytes);
  if (charge)
    state.used = { ...state.used, steps: state.used.steps + charge.steps, tokens: state.used.tokens + charge.tokens };
  const outcome = wait.kind === 'sleep' ? 'woke' : isTimeout(entry) ? 'timed_out' : 'delivered';
  env.metrics.waits.inc({ kind: wait.kind, outcome });
  if (charge) env.metrics.childRuns.inc({ event: 'ended', outcome: charge.status });
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

interface ChildCharge {
  steps: number;
  tokens: number;
  /** The child's status, or `timed_out` when this run's deadline came first. */
  status: string;
}

/**
 * A child's outcome as the waiting call's observation, with its spend to charge; `early` while it is at work before
 * this run's deadline. Completed: `{ childRunId, answer }`. Stopped (failed, budget_exceeded, cancelled,
 * needs_human): a tool error naming the child's status and reason. Still at work at the deadline: `child_timed_out`
 * (the child's own deadline, no later than this run's, ends it). Crash point `before_child_resume`: the outcome was
 * read, nothing written; the redelivered wake job reads it again.
 */
async function settleChild(
  env: StepEnv,
  wait: Extract<WaitRecord, { kind: 'child' }>,
  now: number,
): Promise<{ entry: ObservationEntry; charge: ChildCharge } | 'early'> {
  if (!env.children) throw new InvariantError('invariant', 'a run waits on a child and no child port');
  const child = await env.children.outcome(wait.childRunId);
  if (!child.ended && now < wait.at) return 'early';
  env.crash.hit('before_child_resume', wait.step + 1);
  const base = { v: 1 as const, kind: 'observation' as const, step: wait.step, callId: wait.callId, tool: wait.tool };
  const { childRunId } = wait;
  const entry: ObservationEntry =
    child.status === 'completed'
      ? { ...base, status: 'ok', output: { childRunId, answer: child.answer ?? '' } }
      : child.ended
        ? {
            ...base,
            status: 'tool_error',
            output: { error: `child_${child.status}`, childRunId, status: child.status, reason: child.reason },
          }
        : { ...base, status: 'tool_error', output: { error: 'child_timed_out', childRunId, status: child.status } };
  const status = child.ended ? child.status : 'timed_out';
  return { entry, charge: { steps: child.steps, tokens: child.tokens, status } };
}

function isTimeout(entry: ObservationEntry | undefined): boolean {
  return (entry?.output as { timedOut?: boolean } | undefined)?.timedOut === true;
}
