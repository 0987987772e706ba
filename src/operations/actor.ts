/**
 * Who asks for an operation: the authenticated operator's name (recorded in the ledger and the journal, never a
 * name typed in a request) and the tenants whose runs they see. A run of another tenant is answered as an unknown
 * one. The one rule of who sees which run: the HTTP layer's checks (API, run page, console) ask it too.
 */
import type { EngineContext, RunArchive } from '../runs/engineContext.js';
import type { ActionRecord, Ledger } from '../ledger/ledger.js';
import { isActionId, isRunId } from '../store/keys.js';
import { readRun } from '../store/runRecord.js';

export interface Actor {
  name: string;
  /** '*' for every tenant, else the tenants this actor sees. */
  tenants: '*' | readonly string[];
}

/** Whether the actor may see runs of `tenant` (none for a run without one). */
export function actorSeesTenant(actor: Pick<Actor, 'tenants'>, tenant: string | null | undefined): boolean {
  return actor.tenants === '*' || (typeof tenant === 'string' && actor.tenants.includes(tenant));
}

type RunTenantDeps = Pick<EngineContext, 'redis' | 'keys'> & { archive?: Pick<RunArchive, 'tenantOf'> | undefined };

/** The run's tenant: from Redis, else (past Redis's retention) from the archive; undefined for an unknown run. */
export async function runTenant(ctx: RunTenantDeps, runId: string): Promise<string | undefined> {
  if (!isRunId(runId)) return undefined;
  return (await readRun(ctx.redis, ctx.keys, runId, ['tenant']))?.tenant ?? (await ctx.archive?.tenantOf(runId));
}

/** Whether the run exists (in Redis or in the archive) and the actor may see it. */
export async function actorSeesRun(ctx: RunTenantDeps, actor: Pick<Actor, 'tenants'>, runId: string): Promise<boolean> {
  const tenant = await runTenant(ctx, runId);
  return tenant !== undefined && actorSeesTenant(actor, tenant);
}

/** The action's record when it exists and the actor may see its run; else undefined. */
export async function visibleAction(
  ctx: EngineContext,
  ledger: Ledger,
  actor: Actor,
  actionId: string,
): Promise<ActionRecord | undefined> {
  if (!isActionId(actionId)) return undefined;
  const rec = await ledger.locate(actionId);
  if (!rec || !(await actorSeesRun(ctx, actor, rec.runId))) return undefined;
  return rec;
}
