/**
 * The version queue, for operators (src/runs/versionQueue.ts):
 *
 *   GET  /v1/operators/version-mismatches?limit=N        runs parked for a version change, newest first,
 *                                                        each with the versions live workers serve for its agent
 *   POST /v1/operators/version-mismatches/:runId/continue {agentVersion?, toolsHash?}
 *   POST /v1/operators/version-mismatches/:runId/cancel
 *
 * Continue re-pins the run to a version live workers serve (the one named, or
 * the only one served; several served and none named is 409
 * `ambiguous_version` listing them) and resumes it, journalled with the
 * authenticated operator's name, in one script. The ledger is untouched:
 * effects recorded under the old version are answered from it, never redone.
 * Tools the new version no longer has: a journalled call to one is answered
 * `unknown_tool` to the model (never dispatched); a run with an unsettled ledger
 * action of such a tool (planned, authorized, dispatched, outcome_unknown,
 * safe_retry, needs_human) is refused (409 `unsettled_actions_of_vanished_tools`,
 * naming them): no worker of the new version could settle it; resolve it in the
 * human queue, or cancel. Cancel is the run's ordinary cancel, only for a run in
 * the version queue. Each decision counts in agent_version_decisions_total.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { FenceError, hasErrorCode } from '../../core/errors.js';
import type { Ledger } from '../../ledger/ledger.js';
import type { LedgerState } from '../../ledger/states.js';
import { continueUnderVersion, isVersionParked, listVersionParked } from '../../runs/versionQueue.js';
import { VersionRegistry, versionLabel, type ServedVersion } from '../../runs/versions.js';
import { isRunId } from '../../store/keys.js';
import { operatorOf, operatorSeesRun, requireOperator } from '../auth.js';
import type { Operator } from '../operatorIdentity.js';
import { cancelRun, type ActionAnswer } from './actions.js';
import { holdSlot } from '../../runs/resume.js';
import { invalid, param } from '../../producer/fieldErrors.js';

export const VERSION_QUEUE_PATH = '/v1/operators/version-mismatches';

export const versionListQuerySchema = z
  .object({ limit: z.coerce.number().int().min(1).max(500).default(100) })
  .strict();
const VERSION = /^[\w.@+:/-]{1,200}$/;
export const continueSchema = z
  .object({
    agentVersion: z.string().regex(VERSION, 'agentVersion: 1-200 letters, digits or _ . @ + : / -').optional(),
    toolsHash: z
      .string()
      .regex(/^[0-9a-f]{16}$/, 'toolsHash: 16 lowercase hex digits')
      .optional(),
  })
  .strict()
  .refine((b) => b.toolsHash === undefined || b.agentVersion !== undefined, {
    path: ['agentVersion'],
    message: 'a toolsHash needs its agentVersion',
  });

/** Ledger states an action has not settled in (a worker of the run's version must still move it). */
const UNSETTLED: ReadonlySet<LedgerState> = new Set([
  'planned',
  'authorized',
  'dispatched',
  'outcome_unknown',
  'safe_retry',
  'needs_human',
]);
const NO_RUN: ActionAnswer = { status: 404, body: { error: 'not_found', message: 'no such run' } };

const labelOf = (s: ServedVersion) => ({
  agentVersion: s.version,
  toolsHash: s.toolsHash,
  label: versionLabel(s.version, s.toolsHash),
  tools: s.tools,
  workers: s.workers.length,
});

/** The version queue as `op` may see it, each run with the versions served for its agent. */
export async function versionQueue(ctx: EngineContext, registry: VersionRegistry, op: Operator, limit: number) {
  const page = await listVersionParked(ctx, { limit, ...(op.tenants !== '*' ? { tenants: op.tenants } : {}) });
  const servedByAgent = new Map<string, ServedVersion[]>();
  for (const agent of new Set(page.runs.map((r) => r.agent))) servedByAgent.set(agent, await registry.served(agent));
  // Served for a run: by a worker that consumes the run's shard.
  const servedFor = (agent: string, runId: string) =>
    (servedByAgent.get(agent) ?? []).filter((s) => s.shards.includes(ctx.keys.shardOf(runId)));
  return {
    total: page.total,
    runs: page.runs.map((r) => ({
      ...r,
      pinned: versionLabel(r.agentVersion, r.toolsHash),
      served: servedFor(r.agent, r.runId).map(labelOf),
    })),
  };
}

/** Continue a parked run under a served version (see the module comment for every refusal). */
export async function continueVersionRun(
  ctx: EngineContext,
  ledger: Ledger,
  registry: VersionRegistry,
  op: Operator,
  runId: string,
  wanted: { agentVersion?: string | undefined; toolsHash?: string | undefined },
): Promise<ActionAnswer> {
  if (!isRunId(runId) || !(await operatorSeesRun(ctx, op, runId))) return NO_RUN;
  const [status, reason, agent, agentVersion, toolsHash] = await ctx.redis.hmget(
    ctx.keys.run(runId).run,
    'status',
    'reason',
    'agent',
    'agentVersion',
    'toolsHash',
  );
  if (!isVersionParked(status, reason))
    return { status: 409, body: { error: 'not_version_parked', runId, status, reason } };
  const shard = ctx.keys.shardOf(runId);
  const served = (await registry.served(agent!)).filter((s) => s.shards.includes(shard));
  const candidates = served.filter(
    (s) =>
      (wanted.agentVersion === undefined || s.version === wanted.agentVersion) &&
      (wanted.toolsHash === undefined || s.toolsHash === wanted.toolsHash),
  );
  if (candidates.length === 0) {
    return {
      status: 409,
      body: {
        error: wanted.agentVersion ? 'version_not_served' : 'no_served_version',
        runId,
        served: served.map(labelOf),
      },
    };
  }
  if (candidates.length > 1)
    return {
      status: 409,
      body: {
        error: 'ambiguous_version',
        runId,
        served: candidates.map(labelOf),
        message: 'name agentVersion (and toolsHash)',
      },
    };
  const to = candidates[0]!;
  const kept = new Set(to.tools);
  const unsettled = (await ledger.listForRun(runId)).filter((a) => UNSETTLED.has(a.state) && !kept.has(a.tool));
  if (unsettled.length > 0) {
    return {
      status: 409,
      body: {
        error: 'unsettled_actions_of_vanished_tools',
        runId,
        to: versionLabel(to.version, to.toolsHash),
        actions: unsettled.map((a) => ({ actionId: a.actionId, tool: a.tool, state: a.state })),
      },
    };
  }
  const used = new Set<string>();
  for (const e of await ctx.store.transcript(runId))
    if (e.kind === 'decision') for (const c of e.toolCalls) used.add(c.name);
  const vanishedTools = [...used].filter((t) => !kept.has(t)).sort();
  try {
    const entry = await continueUnderVersion(ctx, {
      runId,
      from: { version: agentVersion!, toolsHash: toolsHash! },
      to: { version: to.version, toolsHash: to.toolsHash },
      by: op.name,
      vanishedTools,
      now: Date.now(),
    });
    // The park gave the run's slot back; coming back to work it takes one again, once (flowHold is idempotent).
    await holdSlot(ctx, runId);
    ctx.metrics.versionDecisions.inc({ decision: 'continue' });
    ctx.log.info(
      {
        code: 'version_continued',
        runId,
        from: versionLabel(agentVersion!, toolsHash!),
        to: versionLabel(to.version, to.toolsHash),
        operator: op.name,
      },
      'run continued under another version',
    );
    return {
      status: 200,
      body: {
        runId,
        status: 'running',
        from: versionLabel(agentVersion!, toolsHash!),
        to: versionLabel(to.version, to.toolsHash),
        vanishedTools,
        operator: op.name,
        journal: entry,
      },
    };
  } catch (err) {
    if (err instanceof FenceError && err.code === 'run_missing') return NO_RUN;
    // Another operator continued or cancelled it meanwhile: the second click changes nothing.
    if (hasErrorCode(err, 'version_mismatch'))
      return { status: 409, body: { error: 'not_version_parked', runId, message: err.message } };
    if (hasErrorCode(err, 'run_superseded')) {
      ctx.metrics.runsSuperseded.inc({ path: 'continue_version' });
      const laterRunId = String(err.details.laterRunId);
      const message = `a later run of the subject (${laterRunId}) superseded this one: cancel it instead`;
      return { status: 409, body: { error: 'run_superseded', runId, laterRunId, message } };
    }
    throw err;
  }
}

/** Cancel a run of the version queue (the run's ordinary cancel, counted as a version decision). */
export async function cancelVersionRun(ctx: EngineContext, op: Operator, runId: string): Promise<ActionAnswer> {
  if (!isRunId(runId) || !(await operatorSeesRun(ctx, op, runId))) return NO_RUN;
  const [status, reason] = await ctx.redis.hmget(ctx.keys.run(runId).run, 'status', 'reason');
  if (!isVersionParked(status, reason))
    return { status: 409, body: { error: 'not_version_parked', runId, status, reason } };
  const answer = await cancelRun(ctx, op, runId);
  if (answer.status === 200) ctx.metrics.versionDecisions.inc({ decision: 'cancel' });
  return answer;
}

export function versionsRouter(ctx: EngineContext, ledger: Ledger): Router {
  const r = Router();
  const registry = new VersionRegistry(ctx.redis, ctx.keys, ctx.cfg.VERSION_TTL_MS);
  r.get(VERSION_QUEUE_PATH, requireOperator(ctx.cfg, 'viewer'), async (req, res) => {
    const parsed = versionListQuerySchema.safeParse(req.query);
    if (!parsed.success) return void invalid(res, parsed.error);
    res.json(await versionQueue(ctx, registry, operatorOf(res), parsed.data.limit));
  });
  r.post(`${VERSION_QUEUE_PATH}/:id/continue`, requireOperator(ctx.cfg, 'operator'), async (req, res) => {
    const parsed = continueSchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = await continueVersionRun(ctx, ledger, registry, operatorOf(res), param(req.params.id), parsed.data);
    res.status(answer.status).json(answer.body);
  });
  r.post(`${VERSION_QUEUE_PATH}/:id/cancel`, requireOperator(ctx.cfg, 'operator'), async (req, res) => {
    const parsed = z
      .object({})
      .strict()
      .safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = await cancelVersionRun(ctx, operatorOf(res), param(req.params.id));
    res.status(answer.status).json(answer.body);
  });
  return r;
}
