/**
 * An ended run shrinks to what its readers need: its event stream packed into one entry (src/store/runEvents.ts),
 * its journal packed into one string (src/store/runJournal.ts), its spec packed (src/store/runRecord.ts), each
 * action's ledger history folded into its record (src/store/ledgerHistory.ts), each action's reservation let go (a
 * plan reads it only when the record is missing; the record names the same idempotency key). Every reader expands the packed forms,
 * so the API, the console, an SSE replay, a replay of the journal, the archive and an erasure see the same run; the
 * ledger's records, with every move and its evidence, stay for as long as the run is kept. A retry unpacks the
 * journal back into its list in the same atomic change that puts the run back to work (retryRun-17.lua).
 *
 * Called for a run that has ended, by the reconciler's compactor (src/runs/compactor.ts), which the script that ends a
 * run queues it for.
 * Each write is one script fenced on what was read (compactRun-5.lua, foldHistory-3.lua): a run that changed
 * meanwhile (an event appended, retried, erased) is left as it is. Nothing depends on it happening: until it does,
 * or if it fails, the run is as it was, only larger.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../store/connect.js';
import { coalesceWrites } from '../store/luaScripts.js';
import type { KeySpace, RunKeys } from '../store/keys.js';
import { packEntries, unpackEntries } from '../store/runEvents.js';
import { decodeEndedRun, ENDED_RUN_FIELDS, packSpec } from '../store/runRecord.js';
import { packJournal, unpackEntry, unpackJournal } from '../core/journal.js';
import { foldMoves, FOLDED_HISTORY_FIELD, unfoldMoves } from '../store/ledgerHistory.js';
import { compactRunCall, type CompactRunArgs } from '../store/calls/compactRun.js';
import { foldHistoryCall, historyDigest } from '../store/calls/foldHistory.js';
import { isTerminal } from '../core/status.js';

const sha1 = (s: string) => createHash('sha1').update(s, 'utf8').digest('hex');

export interface Compacted {
  /** The events, journal and spec were packed (false: the run was not ended, had nothing to pack, or changed meanwhile). */
  run: boolean;
  /**
   * `packed`: packed now; `nothing`: nothing left to pack; `changed`: the run changed since it was read (nothing
   * written; read it again); `not_ended`: at work again, or gone.
   */
  outcome: 'packed' | 'nothing' | 'changed' | 'not_ended';
  /** Action histories folded. */
  histories: number;
}

/** Compacts an ended run (see above); a run at work, or gone, is left alone. */
export async function compactEndedRun(redis: RedisClient, keys: KeySpace, runId: string): Promise<Compacted> {
  const k = keys.run(runId);
  const read = await readEndedRun(redis, k);
  const { entries, actionKeys, listed, eventsPacked: packedNow, journalPacked: journalPackedNow } = read;
  const { status, finishedAt, erasedAt, storedSpec: spec } = decodeEndedRun(read.fields);
  if (!isTerminal(status)) return { run: false, outcome: 'not_ended', histories: 0 };
  const events =
    entries.length > 0
      ? {
          lastId: entries.at(-1)![0].toString(),
          length: entries.length,
          packedSha1: packedNow ? createHash('sha1').update(packedNow).digest('hex') : '',
          packed: packEntries([...unpackEntries(packedNow), ...entries]),
        }
      : undefined;
  const packedSpec = spec ? packSpec(spec) : undefined;
  const specWrite = spec && packedSpec !== spec ? { sha1: sha1(spec), packed: packedSpec! } : undefined;
  const journal = listed.length > 0 ? packedJournal(listed, journalPackedNow) : undefined;
  const anything = events !== undefined || specWrite !== undefined || journal !== undefined;
  const run =
    anything &&
    (await compactRunCall(redis, k, {
      finishedAt,
      erasedAt,
      events,
      spec: specWrite,
      journal,
    }));
  let histories = 0;
  for (const actionKey of actionKeys) {
    const historyKey = keys.actionHistory(actionKey);
    const [[folded, reservation, actionId], listed] = await Promise.all([
      redis.hmget(actionKey, FOLDED_HISTORY_FIELD, 'reservationKey', 'actionId'),
      redis.lrange(historyKey, 0, -1),
    ]);
    const reserved = reservation ? (await redis.exists(reservation)) === 1 : false;
    if (listed.length === 0 && !reserved) continue;
    const done = await foldHistoryCall(redis, actionKey, historyKey, {
      listDigest: historyDigest(listed),
      foldedSha1: folded === null || folded === undefined ? '' : sha1(folded),
      folded: listed.length > 0 ? foldMoves([...unfoldMoves(folded), ...listed]) : '',
      reservation: reserved ? reservation! : historyKey,
      actionId: actionId ?? '',
    });
    if (done && listed.length > 0) histories++;
  }
  return { run, outcome: run ? 'packed' : anything ? 'changed' : 'nothing', histories };
}

/** What a compaction reads of an ended run. */
interface EndedRunRead {
  /** The values of ENDED_RUN_FIELDS (decodeEndedRun reads them). */
  fields: (string | null)[];
  /** The event stream's entries, oldest first. */
  entries: [string, string[]][];
  eventsPacked: Buffer | null;
  /** The keys of the run's action records. */
  actionKeys: string[];
  /** The journal list's entries as stored (JSON, or compressed behind a marker byte). */
  listed: Buffer[];
  journalPacked: Buffer | null;
}

/**
 * An ended run read by six commands sent in one write, not one atomic read: the write that packs the run
 * (compactRun-5.lua) checks each part it read against the run as it is then (the end and erasure times, the spec's
 * digest, the stream's last id and length, the journal's length, each packed form's digest), so a part that moved
 * between two of these reads is refused there, as one that moved after them is. Cheaper on both sides than the
 * alternatives: a script's reply costs Redis about 0.3 µs for each value, turned into Lua and back, and a MULTI costs
 * the compactor 40-100 µs before its first command is queued (ioredis copies every command defined on the connection
 * onto it). A 5-step run's whole compaction, by a script's read against these commands: Redis 58-61 µs against 38-40,
 * the compactor 172-180 µs against 152-153 (`node dist/bench/compactCpu.js 1000 --steps=5 --inflight=8`).
 */
async function readEndedRun(redis: RedisClient, k: RunKeys): Promise<EndedRunRead> {
  coalesceWrites(redis);
  const [fields, entries, eventsPacked, actionKeys, listed, journalPacked] = await Promise.all([
    redis.hmget(k.run, ...ENDED_RUN_FIELDS),
    redis.xrange(k.events, '-', '+'),
    redis.getBuffer(k.eventsPacked),
    redis.smembers(k.actions),
    redis.lrangeBuffer(k.journal, 0, -1),
    redis.getBuffer(k.journalPacked),
  ]);
  return { fields, entries, eventsPacked, actionKeys, listed, journalPacked };
}

/**
 * The journal's listed entries appended to its packed ones, packed again; undefined (the journal left as it is) when an
 * entry does not unpack: a journal that cannot be read whole is not rewritten.
 */
function packedJournal(listed: Buffer[], packedNow: Buffer | null): CompactRunArgs['journal'] {
  try {
    const entries = [...unpackJournal(packedNow), ...listed.map((raw, i) => unpackEntry(raw, i))];
    return {
      length: listed.length,
      packedSha1: packedNow ? createHash('sha1').update(packedNow).digest('hex') : '',
      packed: packJournal(entries),
    };
  } catch {
    return undefined;
  }
}
