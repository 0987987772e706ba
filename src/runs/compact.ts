/**
 * An ended run shrinks to what its readers need: its event stream packed into one entry (src/store/runEvents.ts),
 * its spec packed (src/store/runRecord.ts), each action's ledger history folded into its record
 * (src/store/ledgerHistory.ts). Every reader expands the packed forms, so the API, the console, an SSE replay, the
 * archive and an erasure see the same run; the ledger's records, with every move and its evidence, stay for as long
 * as the run is kept.
 *
 * Called once a run has ended (the worker after the commit that ends it, an operation that ends a parked run).
 * Each write is one script fenced on what was read (compactRun-2.lua, foldHistory-2.lua): a run that changed
 * meanwhile (an event appended, retried, erased) is left as it is. Nothing depends on it happening: if the process
 * dies before it, or it fails, the run is as it was, only larger.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { packEntries, unpackEntries } from '../store/runEvents.js';
import { packSpec } from '../store/runRecord.js';
import { foldMoves, FOLDED_HISTORY_FIELD, unfoldMoves } from '../store/ledgerHistory.js';
import { compactRunCall } from '../store/calls/compactRun.js';
import { foldHistoryCall } from '../store/calls/foldHistory.js';
import { isTerminal } from '../core/status.js';

const sha1 = (s: string) => createHash('sha1').update(s, 'utf8').digest('hex');

export interface Compacted {
  /** The stream and spec were packed (false: the run was not ended, had nothing to pack, or changed meanwhile). */
  run: boolean;
  /** Action histories folded. */
  histories: number;
}

/** Compacts an ended run (see above); a run at work, or gone, is left alone. */
export async function compactEndedRun(redis: RedisClient, keys: KeySpace, runId: string): Promise<Compacted> {
  const k = keys.run(runId);
  const read = await redis
    .multi()
    .hmget(k.run, 'status', 'finishedAt', 'erasedAt', 'spec')
    .xrange(k.events, '-', '+')
    .getBuffer(k.eventsPacked)
    .smembers(k.actions)
    .exec();
  if (!read) return { run: false, histories: 0 };
  for (const [err] of read) if (err) throw err;
  const [status, finishedAt, erasedAt, spec] = read[0]![1] as (string | null)[];
  const entries = read[1]![1] as [string, string[]][];
  const packedNow = read[2]![1] as Buffer | null;
  const actionKeys = read[3]![1] as string[];
  if (!isTerminal(status)) return { run: false, histories: 0 };
  const events =
    entries.length > 0
      ? {
          lastId: entries.at(-1)![0],
          length: entries.length,
          packedSha1: packedNow ? createHash('sha1').update(packedNow).digest('hex') : '',
          packed: packEntries([...unpackEntries(packedNow), ...entries]),
        }
      : undefined;
  const packedSpec = spec ? packSpec(spec) : undefined;
  const specWrite = spec && packedSpec !== spec ? { sha1: sha1(spec), packed: packedSpec! } : undefined;
  const run =
    (events !== undefined || specWrite !== undefined) &&
    (await compactRunCall(redis, k, {
      finishedAt: Number(finishedAt ?? 0),
      erasedAt: erasedAt ?? undefined,
      events,
      spec: specWrite,
    }));
  let histories = 0;
  for (const actionKey of actionKeys) {
    const historyKey = keys.actionHistory(actionKey);
    const [folded, listed] = await Promise.all([
      redis.hget(actionKey, FOLDED_HISTORY_FIELD),
      redis.lrange(historyKey, 0, -1),
    ]);
    if (listed.length === 0) continue;
    const done = await foldHistoryCall(redis, actionKey, historyKey, {
      listLength: listed.length,
      foldedSha1: folded === null ? '' : sha1(folded),
      folded: foldMoves([...unfoldMoves(folded), ...listed]),
    });
    if (done) histories++;
  }
  return { run, histories };
}
