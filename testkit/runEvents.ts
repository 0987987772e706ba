/**
 * A run's events as its event stream holds them now, expanded from the stream's entries by the engine's own
 * decoder (an entry may hold several events): for tests that check what a run told its viewers.
 */
import type { RedisClient } from '../src/store/connect.js';
import type { KeySpace } from '../src/store/keys.js';
import { readAllEvents, type RunEvent } from '../src/store/runEvents.js';

export type { RunEvent };

/** Every event of the run, oldest first (type, data as written, id as SSE shows it), packed ones included. */
export async function readRunEvents(ctx: { redis: RedisClient; keys: KeySpace }, runId: string): Promise<RunEvent[]> {
  return readAllEvents(ctx.redis, ctx.keys.run(runId));
}
