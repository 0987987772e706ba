/**
 * One tool call of the act stage: the arguments checked, a read retried in code, a write
 * through the effect ledger; and how a decision's calls are grouped to run at once.
 */
import type { Agent } from '../../core/agent.js';
import { DeadlineError, TimeoutError, withScopeSignal, withTimeoutScope, type CallScope } from '../../core/timeout.js';
import type { DecisionEntry, ObservationEntry } from '../../core/journal.js';
import type { ReadTool, ToolContext, WriteTool } from '../../core/tool.js';
import { cappedOutput } from '../../core/toolOutput.js';
import { withRetry } from '../../core/withRetry.js';
import type { StepEnv } from './env.js';
import type { StepState, Terminal } from './state.js';
import type { EffectResult } from '../effects.js';
import { agentSafeParse } from '../../core/agentCode.js';

export type ToolCall = DecisionEntry['toolCalls'][number];
export type ToolResult = { obs: ObservationEntry } | { park: Terminal; approvalFor?: string };

/**
 * The calls' indexes in the batches they run in, in order: consecutive calls run together, a
 * write declared `runsAlone` runs in a batch of its own (after the calls before it, before those after).
 */
export function batchesOf(agent: Agent, calls: readonly ToolCall[]): number[][] {
  const batches: number[][] = [];
  let open: number[] = [];
  calls.forEach((call, i) => {
    const tool = agent.tools.get(call.name);
    // Wait calls run after all the others (src/worker/step/waitCalls.ts).
    if (tool?.effect === 'wait') return;
    if (tool?.effect === 'write' && tool.runsAlone === true) {
      if (open.length > 0) batches.push(open);
      batches.push([i]);
      open = [];
    } else open.push(i);
  });
  if (open.length > 0) batches.push(open);
  return batches;
}

export async function runTool(
  env: StepEnv,
  state: StepState,
  agent: Agent,
  call: ToolCall,
  ctx: ToolContext,
): Promise<ToolResult> {
  const base = { v: 1 as const, kind: 'observation' as const, step: ctx.step, callId: call.id, tool: call.name };
  const tool = agent.tools.get(call.name);
  if (!tool) {
    // A tool gone since the call planned its write (an operator's continue under a version without it): nothing is
    // sent, and a settled write is answered with what it came to, not as a tool that never existed.
    const settled = await env.effects?.settledFor?.(ctx.runId, ctx.step, call.id, call.name);
    if (settled) return effectResult(base, settled);
    return { obs: { ...base, status: 'format_error', output: { error: 'unknown_tool', tool: call.name } } };
  }
  const parsed = agentSafeParse(tool.args, call.args ?? {});
  if (!parsed.success) {
    // A write this call planned before its tool's schema changed (a deploy, a version continue) may have left: it is
    // settled, not reported as a format error the model could answer with a second write.
    if (tool.effect === 'write' && env.effects?.resume) {
      const resumed = await env.effects.resume(writeRequest(state, tool, call, ctx));
      if (resumed) return effectResult(base, resumed);
    }
    // The model sees the format error on its next step; the step budget pays for it.
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
    return { obs: { ...base, status: 'format_error', output: { error: 'invalid_arguments', issues } } };
  }
  if (tool.effect === 'read')
    return { obs: { ...base, ...(await runRead(env, state, call.name, tool, parsed.data, ctx)) } };
  if (tool.effect === 'wait') return { obs: { ...base, status: 'format_error', output: { error: 'wait_not_run' } } };
  if (!env.effects)
    return { obs: { ...base, status: 'tool_error', output: { error: 'write tools are not enabled on this worker' } } };
  return effectResult(base, await env.effects.run({ ...writeRequest(state, tool, call, ctx), args: parsed.data }));
}

/** A write call as the ledger takes it: dispatched under the step's dispatch signal, within the run's deadline. */
function writeRequest(state: StepState, tool: WriteTool, call: ToolCall, ctx: ToolContext) {
  const { spec, dispatchSignal } = state;
  return {
    tool,
    call,
    ctx: { ...ctx, signal: dispatchSignal },
    tenant: spec.tenant,
    deadlineAt: spec.limits.deadlineAt,
    decision: state.decisionDigest,
  };
}

/** A write's result as the step records it: an observation, or the park it asks for. */
function effectResult(
  base: Pick<ObservationEntry, 'v' | 'kind' | 'step' | 'callId' | 'tool'>,
  r: EffectResult,
): ToolResult {
  if (r.kind === 'park')
    return {
      park: { status: r.status, reason: r.reason },
      ...(r.status === 'waiting_approval' ? { approvalFor: r.actionId } : {}),
    };
  return { obs: { ...base, status: r.status, output: r.output, actionId: r.actionId } };
}

/**
 * A read, retried in code; each attempt is bounded by the tool's `timeoutMs` (a TimeoutError, retried like any
 * failed read) and by the run's deadline, and each backoff by the deadline (DeadlineError stops the step). An output
 * past the tool's cap is a tool error: the output itself is never journalled.
 */
async function runRead(
  env: StepEnv,
  state: StepState,
  name: string,
  tool: ReadTool,
  args: unknown,
  ctx: ToolContext,
): Promise<Pick<ObservationEntry, 'status' | 'output'>> {
  const { deadlineAt } = state.spec.limits;
  try {
    const output = await withRetry(
      { maxAttempts: 3, baseMs: env.cfg.RETRY_BASE_MS, maxMs: env.cfg.RETRY_MAX_MS },
      () =>
        withinBounds(
          tool.timeoutMs,
          deadlineAt,
          ctx.signal,
          // The step's context with this call's signal; built without `signal` first, so the accessor is added, not
          // swapped for a data property (which gives the object a hidden class of its own again).
          (scope) => tool.execute(args, withScopeSignal(withoutSignal(ctx), scope)),
          env.now,
        ),
      { signal: ctx.signal, deadlineAt, now: env.now },
    );
    const capped = cappedOutput(tool, output);
    if (!capped.ok) {
      state.log.warn({ code: 'tool_output_too_large', tool: name, ...capped.output }, 'read tool output past its cap');
      return { status: 'tool_error', output: capped.output };
    }
    return { status: 'ok', output };
  } catch (err) {
    if (ctx.signal.aborted || err instanceof DeadlineError) throw err;
    state.log.warn({ code: 'tool_error', tool: name, err }, 'read tool failed');
    return { status: 'tool_error', output: { error: (err as Error).message } };
  }
}

/**
 * fn bounded by the tool's per-attempt timeout and the run's deadline, whichever ends first, in one bounded call
 * (one timer, the signal still made only when read): the deadline's end is a DeadlineError, the timeout's a
 * TimeoutError.
 */
function withinBounds<T>(
  timeoutMs: number,
  deadlineAt: number,
  parent: AbortSignal,
  fn: (scope: CallScope) => Promise<T>,
  now: () => number,
): Promise<T> {
  const left = deadlineAt - now();
  if (left <= 0) return Promise.reject(new DeadlineError(deadlineAt));
  return timeoutMs < left
    ? withTimeoutScope(timeoutMs, parent, fn, () => new TimeoutError(timeoutMs))
    : withTimeoutScope(left, parent, fn, () => new DeadlineError(deadlineAt));
}

function withoutSignal(ctx: ToolContext): Omit<ToolContext, 'signal'> {
  const { signal: _parent, ...rest } = ctx;
  return rest;
}
