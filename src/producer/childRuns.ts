/**
 * Starts the child runs of agent tools (src/runs/children.ts) through the same intake as the API: the child's
 * agent must be run by this deployment and its input must pass that agent's schema; the run is created by
 * createRun (one run per intake event: the event derives from the parent's run, step and call, so a redelivered
 * parent step finds the child it started), in the parent's tenant, admitted under flow control like any run.
 * Its limits are the ones the worker carved out of the parent's; its deadline is the parent's at the latest.
 */
import type { EngineContext } from '../runs/engineContext.js';
import {
  childEventOf,
  childRunsOf,
  type ChildRuns,
  type ChildRunStarter,
  type ChildStart,
  type ChildStartRequest,
  type HandoffLookup,
} from '../runs/children.js';
import { runReplicated } from '../runs/replication.js';
import { buildSpec, createAdmitted, InvalidRunRequest, resolveRequest } from './intake.js';

export function childRunStarter(ctx: EngineContext): ChildRunStarter {
  const children = childRunsOf(ctx);
  return {
    start: (req) => startChildRun(ctx, children, req),
    earlier: (req) => earlierChild(ctx, children, req),
  };
}

/**
 * The child an earlier call of the same hand-off started, told from this call's own child (whose run id derives from
 * the parent's run, step and call, as it always did). An input the intake refuses has no child: start refuses it.
 */
async function earlierChild(ctx: EngineContext, children: ChildRuns, req: HandoffLookup): Promise<string | undefined> {
  const { parent } = req;
  const event = childEventOf(parent.runId, parent.step, parent.callId);
  let own;
  try {
    own = resolveRequest(ctx, { tenant: parent.tenant, agent: req.agent, input: req.input }, event).runId;
  } catch (err) {
    if (!(err instanceof InvalidRunRequest)) throw err;
    return undefined;
  }
  return children.earlier(parent.runId, req.handoff, own);
}

/**
 * Listed on the parent first (with its hand-off, when the tool has an identity), then created: if the process dies in
 * between, the redelivered step creates it.
 */
async function startChildRun(ctx: EngineContext, children: ChildRuns, req: ChildStartRequest): Promise<ChildStart> {
  const { parent, limits, now } = req;
  const event = childEventOf(parent.runId, parent.step, parent.callId);
  const budget = {
    maxSteps: limits.maxSteps,
    maxTokens: limits.maxTokens,
    maxWallMs: limits.deadlineAt - now,
    ...(limits.maxCost ? { maxCost: limits.maxCost } : {}),
  };
  let spec;
  try {
    spec = buildSpec(ctx, { tenant: parent.tenant, agent: req.agent, input: req.input, budget }, now, event);
  } catch (err) {
    if (!(err instanceof InvalidRunRequest)) throw err;
    const error = err.fields.some((f) => f.path === 'agent') ? 'unknown_agent' : 'invalid_input';
    return { kind: 'refused', error, fields: err.fields };
  }
  await children.list(parent.runId, spec.runId, parent.deadlineAt, now, req.handoff);
  const intake = await createAdmitted(
    ctx,
    { ...spec, parent: { runId: parent.runId, step: parent.step, callId: parent.callId } },
    now,
  );
  await runReplicated(ctx, intake.runId, 'intake');
  return { kind: 'started', runId: intake.runId, created: intake.outcome === 'created' };
}
