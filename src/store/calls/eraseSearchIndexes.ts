/** Typed call of src/store/lua/eraseSearchIndexes-1.lua: an erasure takes an ended run out of its search indexes. */
import type { ChainableCommander, Command } from 'ioredis';
import type { RunKeys } from '../keys.js';
import { scriptCommand } from '../luaScripts.js';

/** Queues the call in the erasure's MULTI of the run (its keys watched). */
export function queueEraseSearchIndexes(
  multi: ChainableCommander,
  k: RunKeys,
  runId: string,
  retentionMs: number,
): void {
  const queue = multi as unknown as { sendCommand(c: Command): unknown };
  queue.sendCommand(scriptCommand('eraseSearchIndexes', [k.run, runId, retentionMs]));
}
