/**
 * Replay harness: re-walks a recorded run's journal offline under
 * other limits or retry policies, with the same pre-flight and after-call check
 * as the worker (src/budget/tenantBudget.ts; per step: the journal records a step's
 * usage summed over its attempts, not each attempt's), and reports where it would have stopped and what it
 * would have spent. Nothing is sent anywhere: recorded observations stand in
 * for the tools (the fake transport), recorded usage for the model.
 */
import { defaultInputTokens } from '../core/agent.js';
import { type JournalEntry, encodeEntry, estimateTokens } from '../core/journal.js';
import type { RunSpec } from './spec.js';
import type { ToolSpec } from '../core/model.js';
import { estimateCallTokens, isContext, preflight, spentCheck, type RunUsage } from '../budget/tenantBudget.js';
import type { RunStatus } from '../core/status.js';

export interface ReplayOptions {
  maxSteps?: number;
  maxTokens?: number;
  completionCap: number;
  /** Model attempts allowed per step; a recorded step that needed more fails. */
  maxAttempts?: number;
  /** The agent's estimate of the input's prompt tokens (default: the default estimate of defineAgent). */
  inputTokens?: number;
  /** The tools the agent offers (counted in each estimate as the worker counts them); none when omitted. */
  tools?: readonly ToolSpec[];
}

export interface ReplayReport {
  runId: string;
  recordedSteps: number;
  stepsReplayed: number;
  tokensSpent: number;
  stoppedAt?: { step: number; status: RunStatus; reason: string };
  completed: boolean;
}

/**
 * The extension a `retry` operator entry records (`from=failed,steps=+3,tokens=+0,wall_ms=+0`, src/runs/retryRun.ts).
 */
export function retryExtension(detail: string): { steps: number; tokens: number } {
  const n = (name: string) => Number(new RegExp(`(?:^|,)${name}=\\+(\\d+)`).exec(detail)?.[1] ?? 0);
  return { steps: n('steps'), tokens: n('tokens') };
}

export function replayRun(spec: RunSpec, journal: JournalEntry[], opts: ReplayOptions): ReplayReport {
  const limits = {
    ...spec.limits,
    maxSteps: opts.maxSteps ?? spec.limits.maxSteps,
    maxTokens: opts.maxTokens ?? spec.limits.maxTokens,
    deadlineAt: Number.MAX_SAFE_INTEGER,
  };
  const replaySpec: RunSpec = { ...spec, limits };
  const used: RunUsage = { steps: 0, tokens: 0 };
  // Offline: the transcript's tokens counted exactly (the worker does so whenever its byte bound could stop a call).
  let contextTokens = 0;
  const inputTokens = opts.inputTokens ?? defaultInputTokens(spec.input);
  const decisions = journal.filter((e) => e.kind === 'decision');
  const report: ReplayReport = {
    runId: spec.runId,
    recordedSteps: decisions.length,
    stepsReplayed: 0,
    tokensSpent: 0,
    completed: false,
  };
  // An operator's retry raised the run's own limits from its place in the journal on (a limit given to the replay stays
  // as given).
  const extend = (e: JournalEntry) => {
    if (e.kind !== 'operator' || e.action !== 'retry') return;
    const more = retryExtension(e.detail);
    if (opts.maxSteps === undefined) limits.maxSteps += more.steps;
    if (opts.maxTokens === undefined) limits.maxTokens += more.tokens;
  };
  let applied = -1;
  for (let i = 0; i < journal.length; i++) {
    const d = journal[i]!;
    if (i > applied) extend(d);
    if (d.kind !== 'decision') continue;
    const stop = preflight(
      replaySpec,
      used,
      estimateCallTokens(inputTokens, contextTokens, opts.completionCap, opts.tools),
      0,
    );
    if (stop) {
      report.stoppedAt = { step: d.step, status: 'budget_exceeded', reason: stop.reason };
      break;
    }
    if (opts.maxAttempts !== undefined && d.attempts > opts.maxAttempts) {
      report.stoppedAt = {
        step: d.step,
        status: 'failed',
        reason: `model_failed: needed ${d.attempts} attempts, policy allows ${opts.maxAttempts}`,
      };
      break;
    }
    used.tokens += d.usage.promptTokens + d.usage.completionTokens;
    // As in the worker: a call that ends past the limit is charged, and its decision is not acted on.
    const over = spentCheck(replaySpec, used.tokens);
    if (over) {
      report.stoppedAt = { step: d.step, status: 'budget_exceeded', reason: over.reason };
      break;
    }
    used.steps += 1;
    for (const e of journal.filter((x) => x.step === d.step && isContext(x.kind)))
      contextTokens += estimateTokens(encodeEntry(e));
    report.stepsReplayed++;
    if (d.final !== undefined && d.toolCalls.length === 0) {
      report.completed = true;
      break;
    }
    // The run stopped on its steps here unless a retry before the next decision raised them: apply those first.
    for (let j = i + 1; j < journal.length && journal[j]!.kind !== 'decision'; j++) {
      extend(journal[j]!);
      applied = j;
    }
    if (used.steps >= limits.maxSteps) {
      report.stoppedAt = {
        step: d.step,
        status: 'budget_exceeded',
        reason: `steps: ${used.steps} of ${limits.maxSteps} used`,
      };
      break;
    }
  }
  report.tokensSpent = used.tokens;
  return report;
}
