/**
 * Turns what a run left behind into timeline lines: its event stream (step
 * commits, journalled decisions, status changes), its ledger history (every
 * transition with who, why and evidence) and the notable lines its workers
 * logged (handoffs, replayed decisions, retries in code, reconciliations).
 * Also the small shared result shape of every scenario.
 */
import type { RunViewJson, ScenarioWorker, Stack, WorkerLogLine } from './stack.js';
import { brief, type EventFollower, type RunEvent, type Timeline } from './timeline.js';

export interface ScenarioResult {
  name: string;
  ok: boolean;
  /** Expectations that did not hold (empty when ok). */
  failures: string[];
  /** Rendered timeline lines. */
  timeline: string[];
  /** Expectations checked, with their outcome. */
  checks: { what: string; ok: boolean }[];
  /** The counts printed as the final JSON line. */
  summary: Record<string, unknown>;
  /** The run as the API showed it at the end (for tests). */
  view?: RunViewJson;
}

/** Collects named expectations. */
export class Checks {
  readonly list: { what: string; ok: boolean }[] = [];
  expect(ok: boolean, what: string): boolean {
    this.list.push({ what, ok });
    return ok;
  }
  get failures(): string[] {
    return this.list.filter((c) => !c.ok).map((c) => c.what);
  }
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** One scripted model turn as the scenarios write them (the run carries them as its script). */
export interface Turn {
  toolCalls: { name: string; args: Record<string, unknown> }[];
  final?: string;
  usage: Usage;
}

/** Tokens of turns 1..n of a script (what the budget must show after n steps). */
export function scriptTokens(script: { usage: Usage }[], n = script.length): number {
  return script.slice(0, n).reduce((s, t) => s + t.usage.promptTokens + t.usage.completionTokens, 0);
}

function workerOfPid(workers: ScenarioWorker[], by: string): string {
  const pid = Number(/^worker:(\d+)$/.exec(by)?.[1]);
  const w = workers.find((x) => x.pid === pid);
  return w ? `worker ${w.label}` : by;
}

/** Which worker committed each step, from the workers' own logs. */
export function committers(workers: ScenarioWorker[], runId: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const w of workers) {
    for (const l of w.logs) {
      if (
        l.runId === runId &&
        typeof l.step === 'number' &&
        (l.code === 'step_committed' || l.code?.startsWith('run_'))
      )
        out.set(l.step, w.label);
    }
  }
  return out;
}

function stepSummary(view: RunViewJson, step: number): string {
  const entries = view.transcript.filter((e) => e.step === step);
  const decision = entries.find((e) => e.kind === 'decision') as
    { toolCalls?: { name: string }[]; final?: string } | undefined;
  const obs = entries.filter((e) => e.kind === 'observation') as unknown as {
    tool: string;
    status: string;
    output?: { id?: unknown };
  }[];
  if (!decision) return '';
  if (!decision.toolCalls?.length) return `final answer${decision.final ? `: "${brief(decision.final, 60)}"` : ''}`;
  const parts = decision.toolCalls.map((c, i) => {
    const o = obs[i];
    if (!o) return `${c.name} not run: the step parked`;
    const id = typeof o.output?.id === 'string' ? ` ${o.output.id}` : '';
    const note = o.status === 'deduplicated' ? ' (answered from the ledger, nothing sent)' : '';
    return `${c.name} -> ${o.status}${id}${note}`;
  });
  return parts.join(', ');
}

export function addRunToTimeline(
  tl: Timeline,
  runId: string,
  events: RunEvent[],
  view: RunViewJson,
  workers: ScenarioWorker[],
): void {
  const byStep = committers(workers, runId);
  const commitTimes = new Map<number, string>();
  for (const e of events) if (e.type === 'step_committed') commitTimes.set(Number(e.data.step), e.id.split('-')[0]!);
  for (const e of events) {
    const step = Number(e.data.step);
    switch (e.type) {
      case 'run_created':
        tl.add(e.at, 'run', 'run created (run hash, budget and step 1 job: one script)');
        break;
      case 'step_started':
      case 'effect':
        break; // the decision line and the ledger history say the same, with more detail
      case 'decision':
        // A decision carried by its step's commit shares the commit's instant: the commit line tells it.
        if (commitTimes.get(step) === e.id.split('-')[0]) break;
        tl.add(
          e.at,
          'run',
          view.effects.some((x) => x.step === step)
            ? `step ${step} decision journalled before its write runs (${brief(e.data.tools ?? e.data)})`
            : `step ${step} decision journalled first, as on any redelivered step (${brief(e.data.tools ?? e.data)})`,
        );
        break;
      case 'step_committed': {
        const who = byStep.get(step);
        const status = String(e.data.status ?? '');
        const what = stepSummary(view, step);
        tl.add(
          e.at,
          who ? `worker ${who}` : 'run',
          `step ${step} committed${what ? `: ${what}` : ''}${status && status !== 'running' ? ` [run ${status}]` : ''}`,
        );
        break;
      }
      case 'status_changed':
        tl.add(e.at, 'run', `status -> ${String(e.data.status)}${e.data.reason ? ` (${String(e.data.reason)})` : ''}`);
        break;
      default:
        tl.add(e.at, 'run', `${e.type} ${brief(e.data)}`);
    }
  }
  for (const eff of view.effects) {
    for (const h of eff.history) {
      const ev = h.evidence === undefined ? '' : ` evidence ${brief(h.evidence)}`;
      tl.add(
        h.at,
        'ledger',
        `${eff.tool} ${h.from ?? '(new)'} -> ${h.to} by ${workerOfPid(workers, h.by)}: ${h.why}${ev}`,
      );
    }
  }
  for (const w of workers) addWorkerLogs(tl, w);
}

const DESCRIBE: Record<string, (l: WorkerLogLine) => string> = {
  decision_replayed: () => 'reusing the journalled decision: no second model call',
  stale_step: () => 'stale step job refused by the fence',
  dispatch_retry: (l) => `dispatch retried in code, same key (attempt ${String(l.attempt)} failed: ${String(l.err)})`,
  model_retry: (l) => `model call retried in code (attempt ${String(l.attempt)}: ${String(l.err)})`,
  sigterm_handoff: (l) => `job ${String(l.jobId)} handed back to the queue (moveToWait)`,
  shutdown_started: () => 'SIGTERM: readiness off, no new jobs, in-flight model calls and reads aborted',
  shutdown_done: () => 'worker stopped, exit 0',
  replayed_key: () => 'the service replayed an earlier request with this key',
  dispatch_cancelled: () => 'dispatch refused: the run was cancelled',
};

/** Warnings a scenario's own stack causes on purpose (development mode, a Redis of its own): not the story's. */
const STACK_WARNINGS = new Set(['redis_aof_off', 'development_mode']);

function addWorkerLogs(tl: Timeline, w: ScenarioWorker): void {
  for (const l of w.logs) {
    const code = l.code ?? '';
    let text: string | undefined;
    if (DESCRIBE[code]) text = DESCRIBE[code](l);
    else if (code.startsWith('reconciled_'))
      text = `${String(l.tool ?? 'action')} reconciled with the service: ${code.slice('reconciled_'.length)}`;
    else if (l.level >= 40 && !STACK_WARNINGS.has(code))
      text = `${code || 'log'}: ${String(l.msg ?? '')}${l.err ? ` (${String(l.err)})` : ''}`;
    if (text === undefined) continue;
    tl.add(l.time, `worker ${w.label}`, `${typeof l.step === 'number' ? `step ${l.step}: ` : ''}${text}`);
  }
}

/** Decision steps of the journal, in journal order. */
export function decisionSteps(view: RunViewJson): number[] {
  return view.transcript.filter((e) => e.kind === 'decision').map((e) => e.step);
}

/** What a scenario has when it stops, whether it ran to the end or failed on the way (`error`). */
export interface ScenarioEnd {
  checks: Checks;
  tl: Timeline;
  summary: Record<string, unknown>;
  runId: string;
  stack?: Stack;
  follower?: EventFollower;
  view?: RunViewJson;
  error?: unknown;
}

/** Stops everything the scenario started, adds the run to the timeline and builds its result. */
export async function endScenario(name: string, e: ScenarioEnd): Promise<ScenarioResult> {
  const { checks, tl, summary, stack, runId } = e;
  let view = e.view;
  try {
    if (e.error !== undefined) {
      checks.expect(false, `scenario ran to the end: ${(e.error as Error).message}`);
      if (stack && runId && !view) view = await stack.view(runId).catch(() => undefined);
    }
  } finally {
    e.follower?.close();
    await stack?.stop();
  }
  if (stack) {
    checks.expect(
      stack.problems.length === 0,
      `no worker died unexpectedly${stack.problems.length ? `: ${stack.problems.join('; ')}` : ''}`,
    );
    if (view) addRunToTimeline(tl, runId, e.follower?.events ?? [], view, stack.workers);
  }
  summary.ok = checks.failures.length === 0;
  summary.failures = checks.failures;
  return {
    name,
    ok: checks.failures.length === 0,
    failures: checks.failures,
    checks: checks.list,
    timeline: tl.render(),
    summary,
    ...(view ? { view } : {}),
  };
}
