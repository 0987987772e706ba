/** Typed call of src/store/lua/putSchedule-1.lua: create or replace a schedule's definition within its tenant's cap. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';
import { InvariantError } from '../../core/errors.js';

export interface PutScheduleArgs {
  tenant: string;
  id: string;
  /** The definition, as JSON. */
  definition: string;
  /** The most schedules one tenant may hold. */
  maxPerTenant: number;
}

export type PutScheduleResult = 'replaced' | 'created' | 'limit';

const RESULTS: Record<number, PutScheduleResult> = { 0: 'replaced', 1: 'created', 2: 'limit' };

export async function putSchedule(
  redis: RedisClient,
  k: { definitions: string },
  a: PutScheduleArgs,
): Promise<PutScheduleResult> {
  const reply = Number(
    await script(redis, 'putSchedule')(
      k.definitions,
      `${a.tenant}:${a.id}`,
      a.definition,
      `${a.tenant}:`,
      a.maxPerTenant,
    ),
  );
  const result = RESULTS[reply];
  if (!result) throw new InvariantError('invariant', `putSchedule-1.lua answered ${reply}`);
  return result;
}
