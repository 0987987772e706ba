/**
 * Typed call of src/store/lua/deferNewJob-4.lua, sent with createRun-14.lua in one MULTI: the run is
 * created and its step 1 job waits in the delayed set for its admission (flow control), atomically.
 */
import { randomBytes } from 'node:crypto';
import type { Command } from 'ioredis';
import type { RedisClient } from '../connect.js';
import { InvariantError } from '../../core/errors.js';
import { scriptCommand } from '../luaScripts.js';
import {
  createRunArgs,
  createRunResult,
  type CreateRunArgs,
  type CreateRunKeys,
  type CreateRunResult,
} from './createRun.js';

export interface DeferKeys {
  wait: string;
  delayed: string;
  jobHash: string;
}

/** createRun, with step 1's job (`jobId`) deferred until `startsAt` unless admitted before. */
export async function createDeferredRun(
  redis: RedisClient,
  k: CreateRunKeys,
  a: CreateRunArgs,
  q: DeferKeys,
  jobId: string,
  startsAt: number,
): Promise<CreateRunResult> {
  // The request's own mark on the run it creates: an existing run (the same event again) lacks it, so its job is left
  // alone.
  const token = randomBytes(8).toString('hex');
  const args = { ...a, run: { ...a.run, admissionToken: token } };
  const multi = redis.multi();
  const queue = multi as unknown as { sendCommand(c: Command): unknown };
  queue.sendCommand(scriptCommand('createRun', createRunArgs(k, args)));
  queue.sendCommand(scriptCommand('deferNewJob', [k.run, q.wait, q.delayed, q.jobHash, token, jobId, startsAt]));
  const res = await multi.exec();
  if (!res) throw new InvariantError('script_failed', 'createRun + deferNewJob: MULTI returned nothing');
  for (const [err] of res) if (err) throw err;
  return createRunResult(args, res[0]![1]);
}
