/**
 * The version queue: runs parked needs_human / version_mismatch because no live
 * worker serves the agent version (and tools hash) they are pinned to. Kept by
 * the status-changing scripts (includes/runIndex.lua: the park's commit adds a
 * run, any change out of needs_human removes it), one zset per shard
 * (KeySpace.versionQueue), so listing and counting never SCAN.
 *
 * Two ways out, both an operator's: continue under a version live workers serve
 * (continueUnderVersion: re-pin + journal + resume, one script) or cancel (the
 * run's ordinary cancel, src/runs/stop.ts).
 */
import type { EngineContext } from './engineContext.js';
import { captureAddStandardJob } from '../store/bullmqInternals.js';
import { continueVersion } from '../store/calls/continueVersion.js';
import { stepJobId } from '../store/keys.js';
import { encodeEntry, type OperatorEntry } from '../core/journal.js';
import { FenceError } from '../core/errors.js';
import { runSpecSchema, type StepJobData } from './spec.js';
import { STEP_JOB_NAME } from '../store/queues.js';
import { versionLabel } from './versions.js';
import { readRun } from '../store/runRecord.js';

export interface ParkedRun {
  runId: string;
  tenant: string;
  agent: string;
  /** The version and tools hash the run is pinned to. */
  agentVersion: string;
  toolsHash: string;
  reason: string;
  /** The run's cursor: the step it resumes at. */
  step: number;
  /** ms of the park. */
  parkedAt: number;
}

export interface ParkedPage {
  runs: ParkedRun[];
  /**
   * Runs in the queue over every shard, of the listed tenants only when `tenants` is given (the listing shows at most
   * `limit`, newest park first).
   */
  total: number;
}

/** Entries read per shard per listed row, at most (a tenant-scoped listing skips other tenants' runs). */
const EXAMINE_FACTOR = 10;

/** Reason prefix of a park for a version change (the reason's code). */
export const VERSION_MISMATCH = 'version_mismatch';

export function isVersionParked(status: string | null | undefined, reason: string | null | undefined): boolean {
  return status === 'needs_human' && (reason ?? '').startsWith(VERSION_MISMATCH);
}

/**
 * Parked runs, newest park first, `limit` at most; `tenants` (undefined = all) filters on each run's
 * hash. Entries whose run expired are dropped from the queue when met. No cursor: the queue is meant to
 * be short (a person empties it); `total` says how many there are, of `tenants` only when it is given.
 */
export async function listVersionParked(
  ctx: EngineContext,
  opts: { limit: number; tenants?: readonly string[] },
): Promise<ParkedPage> {
  const perShard = await Promise.all(
    ctx.keys.allShards().map(async (shard) => {
      const key = ctx.keys.versionQueue(shard);
      // Bounded per request: the newest `limit x EXAMINE_FACTOR` entries of each shard (a tenant filter may skip some).
      const [entries, total] = await Promise.all([
        ctx.redis.zrange(key, 0, opts.limit * EXAMINE_FACTOR - 1, 'REV', 'WITHSCORES'),
        opts.tenants === undefined ? ctx.redis.zcard(key) : tenantsParked(ctx, shard, opts.tenants),
      ]);
      const out: { runId: string; at: number; key: string }[] = [];
      for (let i = 0; i < entries.length; i += 2) out.push({ runId: entries[i]!, at: Number(entries[i + 1]), key });
      return { out, total };
    }),
  );
  const candidates = perShard.flatMap((s) => s.out).sort((a, b) => b.at - a.at || (a.runId < b.runId ? 1 : -1));
  const runs: ParkedRun[] = [];
  for (const c of candidates) {
    if (runs.length >= opts.limit) break;
    const run = await readRun(ctx.redis, ctx.keys, c.runId, [
      'reason',
      'tenant',
      'agent',
      'agentVersion',
      'toolsHash',
      'cursor',
    ]);
    if (!run) {
      await ctx.redis.zrem(c.key, c.runId);
      continue;
    }
    const { reason, tenant, agent, agentVersion, toolsHash, cursor } = run;
    if (opts.tenants !== undefined && !opts.tenants.includes(tenant)) continue;
    runs.push({
      runId: c.runId,
      tenant,
      agent,
      agentVersion,
      toolsHash,
      reason,
      step: cursor,
      parkedAt: c.at,
    });
  }
  return { runs, total: perShard.reduce((n, s) => n + s.total, 0) };
}

/**
 * Runs of `tenants` in one shard's version queue. The queue's own count (ZCARD) is every tenant's runs, which a
 * tenant-scoped reader may not learn; a parked run is also in its tenant's needs_human listing index (the same script
 * writes both, includes/runIndex.lua), so ZINTERCARD of the two counts a tenant's runs in Redis with nothing read out.
 * Bounded: one call per shard and tenant of the reader, each walking the smaller of the two sets (at most the shard's
 * queue, which a person empties), in the shard's slot.
 */
async function tenantsParked(ctx: EngineContext, shard: number, tenants: readonly string[]): Promise<number> {
  const queue = ctx.keys.versionQueue(shard);
  const counts = await Promise.all(
    [...new Set(tenants)].map((t) => ctx.redis.zintercard(2, queue, ctx.keys.runsByTenant(shard, t, 'needs_human'))),
  );
  return counts.reduce((n, c) => n + c, 0);
}

export interface ContinueRequest {
  runId: string;
  /** The pin the operator saw (the change is refused if it moved: a concurrent continue). */
  from: { version: string; toolsHash: string };
  to: { version: string; toolsHash: string };
  /** The authenticated operator. */
  by: string;
  /** Tool names the run's journal uses that the new version does not have (recorded in the journal entry). */
  vanishedTools: readonly string[];
  now: number;
}

/**
 * Re-pins the run to `to` and resumes it at its cursor with a new job
 * (`<runId>.s<step>.r<n>`), journalling an `operator` entry `continue_version`
 * with who and both versions, in one script (continueVersion-13.lua). The
 * ledger is untouched: the resumed step answers recorded effects from it. Throws
 * FenceError run_missing, AgentError version_mismatch when the run is not
 * (or no longer) parked for a version change or its pin moved, AgentError
 * run_superseded (details.laterRunId) when a later run of its subject superseded it,
 * or AgentError parent_moved_on (details.parentRunId) when it is a child whose
 * parent's wake took its outcome (its mark, includes/outcomeTaken.lua).
 */
export async function continueUnderVersion(ctx: EngineContext, req: ContinueRequest): Promise<OperatorEntry> {
  const { runId } = req;
  const k = ctx.keys.run(runId);
  const run = await readRun(ctx.redis, ctx.keys, runId, ['spec', 'cursor', 'resumes']);
  const rawSpec = run?.spec;
  const state = await ctx.store.readState(runId);
  if (!state || rawSpec === undefined) throw new FenceError('run_missing', 'the run does not exist', { runId });
  const spec = runSpecSchema.parse({
    ...(JSON.parse(rawSpec) as object),
    agentVersion: req.to.version,
    toolsHash: req.to.toolsHash,
  });
  const cursor = run?.cursor ?? state.cursor;
  const jobId = `${stepJobId(runId, cursor)}.r${(run?.resumes ?? 0) + 1}`;
  // An operator's retry may have extended the run's limits: the continued run keeps them, as a resume's job does.
  const limits = await ctx.store.extendedLimits(runId);
  const data: StepJobData = {
    v: 1,
    runId,
    step: cursor,
    used: state.used,
    resume: true,
    ...(limits ? { limits } : {}),
  };
  const job = captureAddStandardJob(ctx.queues.forRun(runId), STEP_JOB_NAME, data, {
    ...ctx.queues.jobOptions(runId, cursor),
    jobId,
  });
  const detail =
    `${versionLabel(req.from.version, req.from.toolsHash)} -> ${versionLabel(req.to.version, req.to.toolsHash)}` +
    (req.vanishedTools.length > 0 ? `; vanished tools: ${req.vanishedTools.join(',')}` : '');
  const entry: OperatorEntry = {
    v: 1,
    kind: 'operator',
    step: cursor,
    action: 'continue_version',
    by: req.by,
    at: req.now,
    detail,
  };
  const subjectLatest = await ctx.store.subjectLatestOf(runId);
  await continueVersion(
    ctx.redis,
    { run: k.run, journal: k.journal, events: k.events, subjectLatest },
    {
      runId,
      fromVersion: req.from.version,
      fromToolsHash: req.from.toolsHash,
      spec: JSON.stringify(spec),
      toVersion: req.to.version,
      toToolsHash: req.to.toolsHash,
      jobId,
      now: req.now,
      eventsMaxLen: ctx.cfg.EVENTS_MAX_LEN,
      entry: encodeEntry(entry),
      event: JSON.stringify({
        status: 'running',
        reason: 'continued_under_version',
        from: 'needs_human',
        agentVersion: req.to.version,
        toolsHash: req.to.toolsHash,
      }),
      job,
    },
  );
  return entry;
}
