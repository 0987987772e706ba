/**
 * Stage 3, act: the decision's tool calls, in order. Reads are retried in code;
 * writes go through the effect ledger (src/ledger), which answers a confirmed
 * effect from its record and reconciles one that may have left the process. The
 * run's deadline bounds the tools too: none starts past it, none waits past it
 * (the calls not run are dropped). Returns the step's commit: the observations
 * and the run's next status, or the park a write asked for.
 */
import type { Agent } from '../../core/agent.js';
import { ShutdownError } from '../../core/errors.js';
import { DeadlineError, withDeadlineScope } from '../../core/timeout.js';
import type { DecisionEntry, JournalEntry, ObservationEntry } from '../../core/journal.js';
import type { ReadTool, ToolContext } from '../../core/tool.js';
import { withRetry } from '../../core/withRetry.js';
import { wallClockStop, type BudgetStop } from '../../budget/tenantBudget.js';
import { nextStatus } from '../../budget/policy.js';
import type { StepEnv } from './env.js';
import { stopPlan, total, type CommitPlan, type StepState, type Terminal } from './state.js';

type ToolCall = DecisionEntry['toolCalls'][number];
type ToolResult = { obs: ObservationEntry } | { park: Terminal; approvalFor?: string };

export async function act(env: StepEnv, state: StepState, agent: Agent, decision: DecisionEntry): Promise<CommitPlan> {
  const { runId, step, spec, signal } = state;
  const ctx: ToolContext = { runId, step, signal, trace: state.trace, input: spec.input };
  const observations: ObservationEntry[] = [];
  let wallStop: BudgetStop | undefined;
  for (const call of decision.toolCalls) {
    if (signal.aborted) throw new ShutdownError();
    if (env.now() >= spec.limits.deadlineAt) {
      wallStop = wallClockStop(spec, env.now());
      break;
    }
    // A tool that ran into the deadline stops the step on the wall clock (a BudgetStop instead of a result).
    const result: ToolResult | BudgetStop = await runTool(env, state, agent, call, ctx).catch((err: unknown) => {
      if (!(err instanceof DeadlineError) || signal.aborted) throw err;
      return wallClockStop(spec, env.now(), err.cause !== undefined);
    });
    if ('kind' in result) {
      wallStop = result;
      break;
    }
    // A write was requested, so the decision is already journalled: park at this step
    // (a park into waiting_approval records the approval request in the same commit).
    if ('park' in result)
      return {
        ...stopPlan(step, result.park, observations),
        ...(result.approvalFor ? { approvalFor: result.approvalFor } : {}),
      };
    observations.push(result.obs);
  }
  return advancePlan(env, state, decision, observations, wallStop);
}

/**
 * The commit of a step whose tools all ran (or stopped at the deadline): the run's next status by the budget policy.
 */
function advancePlan(
  env: StepEnv,
  state: StepState,
  decision: DecisionEntry,
  observations: ObservationEntry[],
  wallStop: BudgetStop | undefined,
): CommitPlan {
  const { step, spec, carriesDecision } = state;
  const entries: JournalEntry[] = carriesDecision ? [decision, ...observations] : [...observations];
  const { status, reason, budget } = nextStatus(spec, state.used, decision, wallStop);
  if (budget) env.metrics.budgetStops.inc({ kind: budget });
  if (budget === 'wall_clock') state.log.warn({ code: 'budget_exceeded', kind: budget }, reason);
  if (status !== 'running') entries.push({ v: 1, kind: 'status', step, status, reason });
  return {
    entries,
    carriesDecision,
    status,
    reason,
    stepsDelta: 1,
    tokensDelta: carriesDecision ? total(decision.usage) : 0,
    advance: true,
  };
}

async function runTool(
  env: StepEnv,
  state: StepState,
  agent: Agent,
  call: ToolCall,
  ctx: ToolContext,
): Promise<ToolResult> {
  const base = { v: 1 as const, kind: 'observation' as const, step: ctx.step, callId: call.id, tool: call.name };
  const tool = agent.tools.get(call.name);
  if (!tool) return { obs: { ...base, status: 'format_error', output: { error: 'unknown_tool', tool: call.name } } };
  const parsed = tool.args.safeParse(call.args ?? {});
  if (!parsed.success) {
    // The model sees the format error on its next step; the step budget pays for it.
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
    return { obs: { ...base, status: 'format_error', output: { error: 'invalid_arguments', issues } } };
  }
  if (tool.effect === 'read')
    return { obs: { ...base, ...(await runRead(env, state, call.name, tool, parsed.data, ctx)) } };
  if (!env.effects)
    return { obs: { ...base, status: 'tool_error', output: { error: 'write tools are not enabled on this worker' } } };
  const { spec, dispatchSignal } = state;
  const r = await env.effects.run({
    tool,
    args: parsed.data,
    call,
    ctx: { ...ctx, signal: dispatchSignal },
    tenant: spec.tenant,
    deadlineAt: spec.limits.deadlineAt,
  });
  if (r.kind === 'park')
    return {
      park: { status: r.status, reason: r.reason },
      ...(r.status === 'waiting_approval' ? { approvalFor: r.actionId } : {}),
    };
  return { obs: { ...base, status: r.status, output: r.output, actionId: r.actionId } };
}

/** A read, retried in code; each attempt and each backoff ends by the run's deadline (DeadlineError stops the step). */
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
        withDeadlineScope(
          deadlineAt,
          ctx.signal,
          (scope) =>
            tool.execute(args, {
              ...ctx,
              get signal() {
                return scope.signal;
              },
            }),
          env.now,
        ),
      { signal: ctx.signal, deadlineAt, now: env.now },
    );
    return { status: 'ok', output };
  } catch (err) {
    if (ctx.signal.aborted || err instanceof DeadlineError) throw err;
    state.log.warn({ code: 'tool_error', tool: name, err }, 'read tool failed');
    return { status: 'tool_error', output: { error: (err as Error).message } };
  }
}
