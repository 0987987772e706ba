/**
 * The wait calls of a decision (tools built with defineWaitTool), run after every other call of the
 * step: the first one parks the run (a sleep, or a wait for an event on a key) or answers at once (a
 * sleep already due, a delivery kept for the key); any other wait call of the same step is a format
 * error the model sees, except agent-tool calls: every one of them starts its child, and the run waits
 * for all of them in one park (each child with its share of the run's budget). A sleep counts against
 * the run's wall clock: one that would end at or past the deadline stops the run `budget_exceeded`
 * (wall_clock) at once; a wait for an event times out at the deadline at the latest. If the process
 * dies before the commit, the step is redelivered and the wait asked again: registering the same wait
 * on a key is idempotent, and so is starting a child (its run id derives from this run, step and call;
 * the decision that asked was journalled first, src/worker/step/decide.ts).
 */
import { z } from 'zod';
import type { Agent } from '../../core/agent.js';
import type { ObservationEntry } from '../../core/journal.js';
import type { ChildRequest, ToolContext, WaitRequest, WaitTool } from '../../core/tool.js';
import { carveLimits, handoffDigestOf } from '../../runs/children.js';
import { childResult } from './wake.js';
import { eventKeySchema } from '../../runs/spec.js';
import type { BudgetStop } from '../../budget/tenantBudget.js';
import { waitIdOf, type WaitRecord } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import type { StepState } from './state.js';
import type { ToolCall } from './tools.js';
import { agentSafeParse } from '../../core/agentCode.js';

export interface WaitsStarted {
  /** Observations of wait calls answered at once, by the call's index. */
  observed: Map<number, ObservationEntry>;
  park?: WaitRecord;
  stop?: BudgetStop;
}

/** Whether a call names one of the agent's wait tools. */
export function isWaitCall(agent: Agent, call: ToolCall): boolean {
  return agent.tools.get(call.name)?.effect === 'wait';
}

export async function startWaits(
  env: StepEnv,
  state: StepState,
  agent: Agent,
  calls: readonly ToolCall[],
  indexes: readonly number[],
  ctx: ToolContext,
): Promise<WaitsStarted> {
  const out: WaitsStarted = { observed: new Map() };
  // The children of one step share what the run has left: each gets at most its part.
  const share = indexes.filter((i) => startsChild(agent, calls[i]!)).length;
  for (const i of indexes) {
    const call = calls[i]!;
    const base = { v: 1 as const, kind: 'observation' as const, step: state.step, callId: call.id, tool: call.name };
    // One wait per step, except that every agent-tool call of the step joins one wait for all their children.
    const joins = out.park?.kind === 'child' && startsChild(agent, call);
    if (out.stop || (out.park && !joins)) {
      out.observed.set(i, { ...base, status: 'format_error', output: { error: 'one_wait_per_step' } });
      continue;
    }
    const asked = requestOf(agent.tools.get(call.name) as WaitTool, call, ctx, env.now());
    if ('error' in asked) {
      out.observed.set(i, { ...base, status: 'format_error', output: asked });
      continue;
    }
    const r =
      asked.kind === 'sleep'
        ? sleep(env, state, asked)
        : asked.kind === 'event'
          ? await eventWait(env, state, call, asked)
          : await childWait(env, state, call, asked, share);
    if ('obs' in r) out.observed.set(i, { ...base, ...r.obs });
    if ('park' in r) out.park = joined(out.park, r.park);
    if ('stop' in r) out.stop = r.stop;
  }
  return out;
}

/** Whether a call names an agent tool (a wait tool whose call starts a child run). */
function startsChild(agent: Agent, call: ToolCall): boolean {
  const tool = agent.tools.get(call.name);
  return tool?.effect === 'wait' && tool.startsChild === true;
}

/** A child's park joined to the step's park on the children it started before: one wait for all of them. */
function joined(park: WaitRecord | undefined, next: WaitRecord): WaitRecord {
  if (park?.kind !== 'child' || next.kind !== 'child') return next;
  return { ...park, children: [...park.children, ...next.children] };
}

type Asked =
  | { kind: 'sleep'; at: number }
  | { kind: 'event'; key: string; timeoutMs: number }
  /** `identity`: the hand-off's identifying arguments (undefined: the tool opted out, every call its own child). */
  | { kind: 'child'; request: ChildRequest; identity: unknown }
  | { error: string; issues?: { path: string; message: string }[] };

/** The wait the tool asks for, from the call's arguments; a bad one is a format error the model sees. */
function requestOf(tool: WaitTool, call: ToolCall, ctx: ToolContext, now: number): Asked {
  const parsed = agentSafeParse(tool.args, call.args ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((x) => ({ path: x.path.join('.'), message: x.message }));
    return { error: 'invalid_arguments', issues };
  }
  let req: WaitRequest;
  let identity: unknown;
  try {
    req = tool.wait(parsed.data, ctx);
    // A hand-off's identity, as a write's: its identifying arguments (default all of them), canonical JSON.
    if (tool.startsChild === true && tool.identity !== false)
      identity = tool.identity ? tool.identity(parsed.data) : parsed.data;
  } catch {
    return { error: 'invalid_wait' };
  }
  const asked = checked(req, now);
  return 'kind' in asked && asked.kind === 'child' ? { ...asked, identity } : asked;
}

/** The latest instant a date can name (ms since the epoch): a wait past it has no time to be due at. */
export const LATEST_TIME_MS = 8.64e15;
const instant = z.number().min(0).max(LATEST_TIME_MS, 'at most 8.64e15 (the latest date)');
const duration = z.number().min(0).max(LATEST_TIME_MS, 'at most 8.64e15 ms');
const amount = z.number().positive().max(LATEST_TIME_MS);

/**
 * Every numeric field of a wait request bounded, whatever the tool computed from the model's arguments: a value no
 * date, timer or budget can hold is the model's format error (`invalid_wait`, naming the field), never an
 * exception that fails the run.
 */
const requestSchemas = {
  sleepUntil: z.object({ kind: z.literal('sleep'), untilMs: instant }),
  sleepFor: z.object({ kind: z.literal('sleep'), forMs: duration }),
  // A key POST /v1/events can name (eventKeySchema): a wait on any other could never be delivered to.
  event: z.object({ kind: z.literal('event'), key: eventKeySchema, timeoutMs: amount }),
  child: z.object({
    kind: z.literal('child'),
    agent: z.string().min(1),
    budget: z
      .object({
        maxSteps: amount.optional(),
        maxTokens: amount.optional(),
        maxWallMs: amount.optional(),
        maxCost: amount.optional(),
      })
      .optional(),
  }),
};

function checked(req: WaitRequest, now: number): Asked {
  const r = req as Partial<Record<string, unknown>> | null;
  const schema =
    r?.kind === 'event'
      ? requestSchemas.event
      : r?.kind === 'child'
        ? requestSchemas.child
        : r !== null && typeof r === 'object' && 'untilMs' in r
          ? requestSchemas.sleepUntil
          : requestSchemas.sleepFor;
  const parsed = schema.safeParse(req);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((x) => ({ path: x.path.join('.'), message: x.message }));
    return { error: 'invalid_wait', issues };
  }
  if (req.kind === 'event') return { kind: 'event', key: req.key, timeoutMs: Math.ceil(req.timeoutMs) };
  if (req.kind === 'child') return { kind: 'child', request: req, identity: undefined };
  const at = Math.round('untilMs' in req ? req.untilMs : now + req.forMs);
  if (at > LATEST_TIME_MS) return { error: 'invalid_wait', issues: [{ path: 'forMs', message: 'ends past 8.64e15' }] };
  return { kind: 'sleep', at };
}

type Started =
  | { obs: Pick<ObservationEntry, 'status' | 'output'> }
  | { obs: Pick<ObservationEntry, 'status' | 'output'>; park: WaitRecord }
  | { park: WaitRecord }
  | { stop: BudgetStop };

/** A sleep: due already (answered now), past the deadline (the run stops), or a park until its time. */
function sleep(env: StepEnv, state: StepState, asked: { at: number }): Started {
  const { deadlineAt } = state.spec.limits;
  const obs = { status: 'ok', output: { sleptUntil: new Date(asked.at).toISOString() } };
  if (asked.at <= env.now()) return { obs };
  if (asked.at >= deadlineAt) {
    env.metrics.waits.inc({ kind: 'sleep', outcome: 'refused' });
    const reason =
      `wall_clock: a sleep until ${new Date(asked.at).toISOString()} ends past ` +
      `the deadline ${new Date(deadlineAt).toISOString()}`;
    return { stop: { kind: 'wall_clock', reason } };
  }
  return { obs, park: { kind: 'sleep', at: asked.at } };
}

/** A wait for an event: a delivery kept for the key answers now; else the run parks until one or the timeout. */
async function eventWait(
  env: StepEnv,
  state: StepState,
  call: ToolCall,
  asked: { key: string; timeoutMs: number },
): Promise<Started> {
  const now = env.now();
  const at = Math.min(now + asked.timeoutMs, state.spec.limits.deadlineAt);
  const waitId = waitIdOf(state.runId, { step: state.step, callId: call.id });
  const r = await env.store.awaitEvent({
    tenant: state.spec.tenant,
    agent: state.spec.agent,
    key: asked.key,
    waitId,
    at,
    now,
    runId: state.runId,
  });
  if (r.kind === 'delivered') {
    env.metrics.waits.inc({ kind: 'event', outcome: 'delivered' });
    return { obs: { status: 'ok', output: { event: JSON.parse(r.payload) as unknown } } };
  }
  if (r.kind === 'busy') {
    env.metrics.waits.inc({ kind: 'event', outcome: 'refused' });
    return { obs: { status: 'tool_error', output: { error: 'event_key_busy' } } };
  }
  return { park: { kind: 'event', at, key: asked.key, step: state.step, callId: call.id, tool: call.name } };
}

/**
 * A child run: started with a budget carved out of its share of what this run has left (none left: a tool error,
 * nothing started), then this run parks `waiting_child` until the child (and every other child of the step) ended,
 * or this run's deadline. A child the intake refuses (unknown agent, input its schema refuses) is a tool error
 * naming the fields. Crash point `after_child_started`: the child exists, the park is not committed; the
 * redelivered step finds the same child and starts the step's children it had not started yet.
 */
async function childWait(
  env: StepEnv,
  state: StepState,
  call: ToolCall,
  { request: asked, identity }: { request: ChildRequest; identity: unknown },
  share: number,
): Promise<Started> {
  const now = env.now();
  const { limits, tenant } = state.spec;
  const refused = (output: Record<string, unknown>): Started => {
    env.metrics.childRuns.inc({ event: 'refused', outcome: String(output.error) });
    return { obs: { status: 'tool_error', output } };
  };
  if (!env.children) return refused({ error: 'child_runs_unavailable' });
  const parent = { runId: state.runId, step: state.step, callId: call.id, tenant, deadlineAt: limits.deadlineAt };
  // The same hand-off asked before in this run: answered from its child (asked before the budget: it costs nothing).
  const handoff = identity === undefined ? undefined : handoffDigestOf(state.runId, call.name, identity);
  if (handoff) {
    const earlier = await env.children.earlier({ parent, agent: asked.agent, input: asked.input, handoff });
    if (earlier) return repeated(env, state, call, earlier);
  }
  const carved = carveLimits(limits, state.used, asked.budget, now, share);
  if (!carved) return refused({ error: 'no_budget_for_child' });
  const r = await env.children.start({
    parent,
    agent: asked.agent,
    input: asked.input,
    limits: carved,
    now,
    ...(handoff ? { handoff } : {}),
  });
  if (r.kind === 'refused') {
    if (r.error === 'unavailable') return refused({ error: 'child_runs_unavailable' });
    const error = r.error === 'unknown_agent' ? 'unknown_child_agent' : 'invalid_child_input';
    return refused({ error, fields: r.fields });
  }
  if (r.created) env.metrics.childRuns.inc({ event: 'started', outcome: 'created' });
  state.log.info({ code: 'child_started', childRunId: r.runId, created: r.created }, 'child run started');
  env.crash.hit('after_child_started', state.step);
  const child = { runId: r.runId, callId: call.id, tool: call.name };
  return { park: { kind: 'child', at: limits.deadlineAt, step: state.step, children: [child] } };
}

/**
 * A hand-off asked again in the run (the same agent tool and identifying arguments as an earlier call's): no second
 * child. The child the earlier call started answers it, marked `deduplicated` as a write's repeat is: at once when
 * that child ended (its answer, or its stop with its actions), else this run waits for it as for its own child (its
 * spend is charged once, with the earlier call's).
 */
async function repeated(env: StepEnv, state: StepState, call: ToolCall, childRunId: string): Promise<Started> {
  const child = await env.children!.outcome(childRunId);
  env.metrics.childRuns.inc({ event: 'repeated', outcome: child.ended ? 'answered' : 'waiting' });
  state.log.info(
    { code: 'child_handoff_repeated', childRunId, tool: call.name, ended: child.ended },
    'hand-off asked again: answered from its earlier child',
  );
  if (child.ended) return { obs: childResult(childRunId, child, true) };
  const entry = { runId: childRunId, callId: call.id, tool: call.name, repeat: true as const };
  return { park: { kind: 'child', at: state.spec.limits.deadlineAt, step: state.step, children: [entry] } };
}
