/**
 * What every scenario does around its own part: a stack started with the scenario's faults and settings, one run
 * created through the API and its events followed, and, however the scenario's part ends (to the end or thrown on
 * the way), everything stopped and the result built (endScenario). A scenario then holds only what it does to
 * its run and what it checks.
 */
import { Checks, endScenario, type ScenarioResult } from './report.js';
import { startStack, type RunViewJson, type Stack, type StackOptions } from './stack.js';
import { followEvents, Timeline, type EventFollower, type RunEvent } from './timeline.js';

/** The statuses a run ends in (a scenario waits for one of them). */
export const TERMINAL = new Set(['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human']);

export interface ScenarioContext {
  stack: Stack;
  runId: string;
  follower: EventFollower;
  tl: Timeline;
  checks: Checks;
  /** The counts of the scenario's final JSON line; `scenario` and `runId` are already in. */
  summary: Record<string, unknown>;
  /** The `status_changed` event that ends the run (waits up to `ms`). */
  ended(ms: number, what?: string): Promise<RunEvent>;
}

export interface ScenarioSetup {
  /** The stack's settings (its timeline is the scenario's). */
  stack: Omit<StackOptions, 'timeline'>;
  /** What the summary says of the scenario before it starts (its options). */
  summary?: Record<string, unknown>;
  /** Timeline lines once the stack is up, before the run is created. */
  beforeRun?: (tl: Timeline) => void;
  /** The body of POST /v1/runs. */
  run: unknown;
  /** The progress line once the run exists. */
  created?: (runId: string) => string;
}

/** Runs `part` on a fresh stack and run; resolves with the result, never throws (a throw is a failed check). */
export async function runScenario(
  name: string,
  setup: ScenarioSetup,
  part: (c: ScenarioContext) => Promise<RunViewJson>,
): Promise<ScenarioResult> {
  const tl = new Timeline();
  const checks = new Checks();
  const summary: Record<string, unknown> = { scenario: name, ...setup.summary };
  let stack: Stack | undefined;
  let follower: EventFollower | undefined;
  let view: RunViewJson | undefined;
  let runId = '';
  let error: unknown;
  try {
    stack = await startStack({ ...setup.stack, timeline: tl });
    setup.beforeRun?.(tl);
    runId = await stack.createRun(setup.run);
    summary.runId = runId;
    follower = followEvents(stack.apiUrl, runId);
    if (setup.created) setup.stack.progress?.(setup.created(runId));
    const f = follower;
    const ended = (ms: number, what = 'the run to finish') =>
      f.waitFor((e) => e.type === 'status_changed' && TERMINAL.has(String(e.data.status)), ms, what);
    view = await part({ stack, runId, follower, tl, checks, summary, ended });
  } catch (err) {
    error = err;
  }
  return endScenario(name, { checks, tl, summary, runId, stack, follower, view, error });
}
