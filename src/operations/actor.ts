/**
 * Who asks for an operation: the authenticated operator's name (recorded in the ledger and the journal, never a
 * name typed in a request) and the tenants whose runs they see. A run of another tenant is answered as an unknown
 * one.
 */
import type { EngineContext } from '../runs/engineContext.js';
import type { ActionRecord, Ledger } from '../ledger/ledger.js';
import { isActionId, isRunId } from '../store/keys.js';
import { readRun } from '../store/runRecord.js';

export interface Actor {
  name: string;
  /** '*' for every tenant, else the tenants this actor sees. */
  tenants: '*' | readonly string[];
}

export function actorSeesTenant(actor: Pick<Actor, 'tenants'>, tenant: string | null | undefined): boolean {
  return actor.tenants === '*' || (typeof tenant === 'string' && actor.tenants.includes(tenant));
}

/** Whether the run exists and the actor may see it. */
export async function actorSeesRun(ctx: EngineContext, actor: Actor, runId: string): Promise<boolean> {
  if (!isRunId(runId)) return false;
  const run = await readRun(ctx.redis, ctx.keys, runId, ['tenant']);
  return run !== undefined && actorSeesTenant(actor, run.tenant);
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
