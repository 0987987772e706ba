/**
 * The version queue's operations: list the runs parked for a version change (each with the versions live workers
 * serve for its agent), continue one under a served version, or cancel it.
 *
 * Continue re-pins the run to a version live workers serve (the one named, or the only one served; several served and
 * none named is refused `ambiguous_version` listing them) and resumes it, journalled with the actor's name, in one
 * script. The ledger is untouched: effects recorded under the old version are answered from it, never redone. Tools
 * the new version no longer has: a journalled call to one is answered `unknown_tool` to the model (never dispatched);
 * a run with an unsettled ledger action of such a tool is refused (`unsettled_actions_of_vanished_tools`, naming
 * them): no worker of the new version could settle it. A child run whose parent took its outcome and moved on is
 * refused (`parent_moved_on`, naming the parent), and so is a run whose stored spec no longer parses (`invalid_spec`,
 * naming the field). Each decision counts in agent_version_decisions_total.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { FenceError, hasErrorCode } from '../core/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import { UNSETTLED_STATES } from '../ledger/states.js';
import { continueUnderVersion, isVersionParked, listVersionParked } from '../runs/versionQueue.js';
import { versionLabel, type ServedVersion, type VersionRegistry } from '../runs/versions.js';
import { holdSlot } from '../runs/resume.js';
import { isRunId } from '../store/keys.js';
import { readRun } from '../store/runRecord.js';
import { actorSeesRun, type Actor } from './actor.js';
import { cancelRun, type Cancelled } from './cancel.js';
import { done, NO_RUN, refused, type Outcome } from './outcome.js';

const labelOf = (s: ServedVersion) => ({
  agentVersion: s.version,
  toolsHash: s.toolsHash,
  label: versionLabel(s.version, s.toolsHash),
  tools: s.tools,
  workers: s.workers.length,
});

/**
 * The version queue as the actor may see it, each run with the versions served for its agent. A tenant-scoped actor's
 * `total` counts its tenants' runs only: the whole queue's size would tell it how many runs other tenants have parked.
 */
export async function versionQueue(ctx: EngineContext, registry: VersionRegistry, actor: Actor, limit: number) {
  const page = await listVersionParked(ctx, { limit, ...(actor.tenants !== '*' ? { tenants: actor.tenants } : {}) });
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

export interface WantedVersion {
  agentVersion?: string | undefined;
  toolsHash?: string | undefined;
}

/** Continue a parked run under a served version (see the module comment for every refusal). */
export async function continueVersionRun(
  ctx: EngineContext,
  ledger: Ledger,
  registry: VersionRegistry,
  actor: Actor,
  runId: string,
  wanted: WantedVersion,
): Promise<Outcome<Record<string, unknown>>> {
  if (!isRunId(runId) || !(await actorSeesRun(ctx, actor, runId))) return NO_RUN;
  const run = await readRun(ctx.redis, ctx.keys, runId, ['reason', 'agent', 'agentVersion', 'toolsHash']);
  if (!run) return NO_RUN;
  if (!isVersionParked(run.status, run.reason))
    return refused('not_version_parked', { runId, status: run.status, reason: run.reason });
  // A child whose parent took its outcome and moved on stays parked (cancel it): it would spend charged to nobody.
  // Read before the script, as the retry does (the parent is on another shard); a wake that takes the outcome after
  // this read has marked the child, which the script refuses. So does a run whose stored spec no longer parses: no
  // version could run it.
  const bar = await ctx.store.parentBar(runId);
  if (bar && 'unreadableSpec' in bar) {
    const field = bar.unreadableSpec;
    ctx.log.warn({ code: 'spec_unreadable', runId, field, operator: actor.name }, 'continue: spec unreadable');
    return refused('invalid_spec', {
      runId,
      field,
      message: `the run's stored spec no longer parses (${field}): no version could run it; cancel it instead`,
    });
  }
  if (bar)
    return refused('parent_moved_on', {
      runId,
      ...bar,
      message: `its parent run ${bar.parentRunId} took this child's outcome and moved on: cancel it instead`,
    });
  const picked = await pickVersion(ctx, registry, runId, run.agent, wanted);
  if (!('to' in picked)) return picked.refusal;
  const { to } = picked;
  const kept = new Set(to.tools);
  const unsettled = (await ledger.listForRun(runId)).filter((a) => UNSETTLED_STATES.has(a.state) && !kept.has(a.tool));
  if (unsettled.length > 0)
    return refused('unsettled_actions_of_vanished_tools', {
      runId,
      to: versionLabel(to.version, to.toolsHash),
      actions: unsettled.map((a) => ({ actionId: a.actionId, tool: a.tool, state: a.state })),
    });
  const from = { version: run.agentVersion, toolsHash: run.toolsHash };
  try {
    return await repin(ctx, runId, actor.name, from, to, await vanishedTools(ctx, runId, kept));
  } catch (err) {
    if (err instanceof FenceError && err.code === 'run_missing') return NO_RUN;
    // Another operator continued or cancelled it meanwhile: the second click changes nothing.
    if (hasErrorCode(err, 'version_mismatch')) return refused('not_version_parked', { runId, message: err.message });
    // Its parent's wake took its outcome after the read above (the child's mark, read by the script).
    if (hasErrorCode(err, 'parent_moved_on')) {
      const parentRunId = String(err.details.parentRunId);
      const parentStatus = await ctx.store.parentStatusOf(parentRunId);
      const message = `its parent run ${parentRunId} took this child's outcome and moved on: cancel it instead`;
      return refused('parent_moved_on', { runId, parentRunId, parentStatus, message });
    }
    if (hasErrorCode(err, 'run_superseded')) {
      ctx.metrics.runsSuperseded.inc({ path: 'continue_version' });
      const laterRunId = String(err.details.laterRunId);
      const message = `a later run of the subject (${laterRunId}) superseded this one: cancel it instead`;
      return refused('run_superseded', { runId, laterRunId, message });
    }
    throw err;
  }
}

/** The one served version the run continues under, or the refusal that says why there is none. */
async function pickVersion(
  ctx: EngineContext,
  registry: VersionRegistry,
  runId: string,
  agent: string,
  wanted: WantedVersion,
): Promise<{ to: ServedVersion } | { refusal: Outcome<never> }> {
  const shard = ctx.keys.shardOf(runId);
  const served = (await registry.served(agent)).filter((s) => s.shards.includes(shard));
  const candidates = served.filter(
    (s) =>
      (wanted.agentVersion === undefined || s.version === wanted.agentVersion) &&
      (wanted.toolsHash === undefined || s.toolsHash === wanted.toolsHash),
  );
  if (candidates.length === 0)
    return {
      refusal: refused(wanted.agentVersion ? 'version_not_served' : 'no_served_version', {
        runId,
        served: served.map(labelOf),
      }),
    };
  if (candidates.length > 1)
    return {
      refusal: refused('ambiguous_version', {
        runId,
        served: candidates.map(labelOf),
        message: 'name agentVersion (and toolsHash)',
      }),
    };
  return { to: candidates[0]! };
}

/** Tools the run's model called that the new version no longer has (their journalled calls answer unknown_tool). */
async function vanishedTools(ctx: EngineContext, runId: string, kept: ReadonlySet<string>): Promise<string[]> {
  const used = new Set<string>();
  for (const e of await ctx.store.transcript(runId))
    if (e.kind === 'decision') for (const c of e.toolCalls) used.add(c.name);
  return [...used].filter((t) => !kept.has(t)).sort();
}

async function repin(
  ctx: EngineContext,
  runId: string,
  by: string,
  from: { version: string; toolsHash: string },
  to: ServedVersion,
  vanished: string[],
): Promise<Outcome<Record<string, unknown>>> {
  const entry = await continueUnderVersion(ctx, {
    runId,
    from,
    to: { version: to.version, toolsHash: to.toolsHash },
    by,
    vanishedTools: vanished,
    now: Date.now(),
  });
  // The park gave the run's slot back; coming back to work it takes one again, once (flowHold is idempotent).
  await holdSlot(ctx, runId);
  ctx.metrics.versionDecisions.inc({ decision: 'continue' });
  const labels = { from: versionLabel(from.version, from.toolsHash), to: versionLabel(to.version, to.toolsHash) };
  ctx.log.info({ code: 'version_continued', runId, ...labels, operator: by }, 'run continued under another version');
  return done({ runId, status: 'running', ...labels, vanishedTools: vanished, operator: by, journal: entry });
}

/** Cancel a run of the version queue (the run's ordinary cancel, counted as a version decision). */
export async function cancelVersionRun(ctx: EngineContext, actor: Actor, runId: string): Promise<Outcome<Cancelled>> {
  if (!isRunId(runId) || !(await actorSeesRun(ctx, actor, runId))) return NO_RUN;
  const run = await readRun(ctx.redis, ctx.keys, runId, ['reason']);
  if (!run) return NO_RUN;
  if (!isVersionParked(run.status, run.reason))
    return refused('not_version_parked', { runId, status: run.status, reason: run.reason });
  const outcome = await cancelRun(ctx, actor, runId);
  if (outcome.kind === 'done') ctx.metrics.versionDecisions.inc({ decision: 'cancel' });
  return outcome;
}
