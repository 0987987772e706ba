/**
 * Stage 1b, wake: the wake job of a run parked on a wait (sleeping | waiting_event) ends the wait
 * before the step decides. A sleep not yet due (a job early: re-created by the sweep, say) and an event
 * wait with neither a delivery nor its timeout are delayed again until the wait's time (DelayedError).
 * An event wait is settled on its key by one compare-and-set (settleEventWait-1.lua: the delivery or the
 * timeout, never both), then wakeRun-5.lua makes the run running again with the wait's result journalled
 * as the waiting call's observation. If the process dies between the two, the redelivered job settles
 * again and gets the same answer; after wakeRun, it finds the run running and goes on. A child wait reads its
 * children's runs (all ended, or one still at work before this run's deadline: delayed again), marks each as taken
 * on its own slot (so no operator puts it back to work after: takeChildOutcome-1.lua), reads their outcomes, and
 * wakeRun-5.lua journals every child's outcome and charges their spend to this run in one change, so the charge and
 * the resume happen once. Under flow control the woken run first waits for a slot (src/worker/step/wakeSlot.ts):
 * wakeRun runs only once it holds one.
 */
import { DelayedError } from 'bullmq';
import { encodeEntry, packEntry, type ObservationEntry } from '../../core/journal.js';
import { waitIdOf, type WaitRecord } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import { grown, type StepState } from './state.js';
import { InvariantError } from '../../core/errors.js';
import type { RunStatus } from '../../core/status.js';
import { takeWakeSlot } from './wakeSlot.js';
import type { ChildOutcome } from '../../runs/children.js';

export async function wake(env: StepEnv, state: StepState, wait: WaitRecord): Promise<void> {
  const now = env.now();
  let charged: ChildrenSettled | undefined;
  let result: ObservationEntry[] | 'early';
  if (wait.kind === 'sleep') result = now >= wait.at ? [] : 'early';
  else if (wait.kind === 'event') {
    const settled = await settle(env, state, wait, now);
    result = settled === 'early' ? settled : [settled];
  } else {
    const settled = await settleChildren(env, state.runId, wait, now);
    result = settled === 'early' ? settled : settled.entries;
    if (settled !== 'early') charged = settled;
  }
  if (result === 'early') {
    await state.job.delay(wait.at);
    state.log.info({ code: 'wake_early', kind: wait.kind, at: wait.at }, 'wake job early: delayed to the wait');
    throw new DelayedError();
  }
  // Flow control: the run's next step waits for a slot like any run's (it gave its own back when it parked).
  await takeWakeSlot(env, state, now);
  const entries = result;
  const json = entries.map(encodeEntry);
  const bytes = json.reduce((n, e) => n + Buffer.byteLength(e), 0);
  const encoded = json.map(packEntry);
  const charge = charged
    ? charged.children.reduce(
        (t, c) => ({ steps: t.steps + c.steps, tokens: t.tokens + c.tokens, cost: t.cost + c.cost }),
        { steps: 0, tokens: 0, cost: 0 },
      )
    : undefined;
  const woke = await env.store.wake(state.job, {
    runId: state.runId,
    step: state.step,
    entries,
    encoded,
    contextBytesDelta: state.used.contextBytes === undefined ? undefined : bytes,
    event: JSON.stringify({
      step: state.step,
      kind: wait.kind,
      at: wait.at,
      lateMs: now - wait.at,
      ...(charged ? { children: charged.children.map((c) => ({ runId: c.runId, status: c.status })) } : {}),
    }),
    now,
    ...(charge ? { charge } : {}),
  });
  if (!woke) return;
  // The state was read before the wake: the journalled results grow the transcript's byte count, the children's
  // spend its budget.
  if (entries.length > 0) state.used = grown(state.used, bytes);
  if (charge)
    state.used = {
      ...state.used,
      steps: state.used.steps + charge.steps,
      tokens: state.used.tokens + charge.tokens,
      ...(charge.cost > 0 ? { cost: (state.used.cost ?? 0) + charge.cost } : {}),
    };
  const outcome = wait.kind === 'sleep' ? 'woke' : isTimeout(entries[0]) ? 'timed_out' : 'delivered';
  env.metrics.waits.inc({ kind: wait.kind, outcome });
  for (const c of charged?.children ?? []) env.metrics.childRuns.inc({ event: 'ended', outcome: c.status });
  state.log.info({ code: 'run_woke', kind: wait.kind, outcome, lateMs: now - wait.at }, 'run woke from its wait');
}

/** An event wait's result as the waiting call's observation, or `early` while it still runs. */
async function settle(
  env: StepEnv,
  state: StepState,
  wait: Extract<WaitRecord, { kind: 'event' }>,
  now: number,
): Promise<ObservationEntry | 'early'> {
  const waitId = waitIdOf(state.runId, wait);
  const { tenant, agent } = state.spec;
  const r = await env.store.settleEventWait({ tenant, agent, key: wait.key, waitId, at: wait.at, now });
  if (r.kind === 'early') return 'early';
  const base = { v: 1 as const, kind: 'observation' as const, step: wait.step, callId: wait.callId, tool: wait.tool };
  if (r.kind === 'timed_out') return { ...base, status: 'ok', output: { timedOut: true } };
  return { ...base, status: 'ok', output: { event: JSON.parse(r.payload) as unknown } };
}

/** The children's outcomes as the waiting calls' observations, with each child's spend to charge. */
interface ChildrenSettled {
  entries: ObservationEntry[];
  children: {
    runId: string;
    steps: number;
    tokens: number;
    cost: number;
    /** The child's status, or `timed_out` when this run's deadline came first. */
    status: RunStatus | 'timed_out';
  }[];
}

/**
 * The children's outcomes as the waiting calls' observations, in the order the model asked, with their spend to
 * charge; `early` while one is at work before this run's deadline. Completed: `{ childRunId, answer }`. Stopped
 * (failed, budget_exceeded, cancelled, needs_human): a tool error naming the child's status and reason, and its
 * actions. Still at work at the deadline: `child_timed_out` (the child's own deadline, no later than this run's, ends
 * it). A repeated hand-off's call (`repeat`) gets its child's result `deduplicated` and charges nothing. Crash point
 * `before_child_resume`: the children were marked (takeChildOutcome-1.lua) and their outcomes read, nothing written
 * to this run; the redelivered wake job marks them again (the same) and reads them again.
 */
async function settleChildren(
  env: StepEnv,
  runId: string,
  wait: Extract<WaitRecord, { kind: 'child' }>,
  now: number,
): Promise<ChildrenSettled | 'early'> {
  const port = env.children;
  if (!port) throw new InvariantError('invariant', 'a run waits on a child and no child port');
  const atDeadline = now >= wait.at;
  // Before the deadline the wait is over only once every child ended: read first, so that a wake early for a child
  // still at work marks none.
  if (!atDeadline && !(await port.allEnded(wait.children))) return 'early';
  // Each child is marked before its outcome is read (on its own slot): an operator's retry, resume or continue of it
  // lands before the mark (it is at work again, and this run waits on) or is refused after it, never between this
  // read and this run's commit, where what it spent again would be charged to nobody.
  const taken = await Promise.all(wait.children.map((c) => port.take(c.runId, runId, atDeadline)));
  if (taken.includes('at_work')) return 'early';
  const outcomes = await Promise.all(wait.children.map((c) => port.outcome(c.runId)));
  env.crash.hit('before_child_resume', wait.step + 1);
  const settled: ChildrenSettled = { entries: [], children: [] };
  wait.children.forEach(({ runId: childRunId, callId, tool, repeat }, i) => {
    const child = outcomes[i]!;
    const base = { v: 1 as const, kind: 'observation' as const, step: wait.step, callId, tool };
    settled.entries.push({ ...base, ...childResult(childRunId, child, repeat === true) });
    // A hand-off asked again waited on the child an earlier call started: its spend is charged with that call's.
    if (repeat) return;
    const status = child.ended ? child.status : 'timed_out';
    settled.children.push({
      runId: childRunId,
      steps: child.steps,
      tokens: child.tokens,
      cost: child.cost ?? 0,
      status,
    });
  });
  return settled;
}

/**
 * A child's outcome as its call's result. Completed: `{ childRunId, answer }`. Stopped: a tool error
 * `child_<status>` with its status and reason; still at work: `child_timed_out`. A stopped or unfinished child's error
 * lists its ledger actions (tool, state, receipt id), so the model knows what it did before it stopped (a refund
 * made) and does not ask for it again. A hand-off asked again (`repeat`: answered from the child an earlier call of
 * the run started) is marked as a write's repeat is, `deduplicated`, with the same output.
 */
export function childResult(
  childRunId: string,
  child: ChildOutcome,
  repeat: boolean,
): Pick<ObservationEntry, 'status' | 'output'> {
  const done = (o: Record<string, unknown>) => (child.moreActions ? { ...o, moreActions: child.moreActions } : o);
  const r: Pick<ObservationEntry, 'status' | 'output'> =
    child.status === 'completed'
      ? { status: 'ok', output: { childRunId, answer: child.answer ?? '' } }
      : child.ended
        ? {
            status: 'tool_error',
            output: done({
              error: `child_${child.status}`,
              childRunId,
              status: child.status,
              reason: child.reason,
              actions: child.actions,
            }),
          }
        : {
            status: 'tool_error',
            output: done({ error: 'child_timed_out', childRunId, status: child.status, actions: child.actions }),
          };
  return repeat ? { ...r, status: 'deduplicated' } : r;
}

function isTimeout(entry: ObservationEntry | undefined): boolean {
  return (entry?.output as { timedOut?: boolean } | undefined)?.timedOut === true;
}
