/**
 * Where a text is still stored, for the erasure tests: every Redis key (of a prefix, or of the whole database) and
 * every text column of the archive whose value holds it, each value read in the form it is stored (journal entries
 * inflated, packed journals, events, specs and histories unpacked).
 */
import { Redis } from 'ioredis';
import type { ArchivePool } from '../../src/archive/db.js';
import { DEFLATE_MARKER, unpackEntry, unpackJournal } from '../../src/core/journal.js';
import { unpackEntries } from '../../src/store/runEvents.js';
import { unpackSpec } from '../../src/store/runRecord.js';
import { unfoldMoves } from '../../src/store/ledgerHistory.js';

/** The keys matching `match` (every key by default) whose name or value, read by type, contains `needle`. */
export async function redisHits(url: string, needle: string, match = '*'): Promise<string[]> {
  const r = new Redis(url);
  const hits: string[] = [];
  const has = (b: Buffer | string) => Buffer.from(b).includes(needle);
  const entry = (b: Buffer) => {
    if (b[0] !== DEFLATE_MARKER) return b;
    try {
      return Buffer.from(unpackEntry(b, 0));
    } catch {
      return b; // not a journal entry
    }
  };
  // An ended run's spec and its actions' folded histories are stored packed (src/runs/compact.ts).
  const packedField = (b: Buffer) => {
    if (b[0] !== '~'.charCodeAt(0)) return b;
    for (const unpack of [unpackSpec, (s: string) => unfoldMoves(s).join(',')])
      try {
        return Buffer.from(unpack(b.toString()));
      } catch {
        // not that packed form
      }
    return b;
  };
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        if (has(key)) hits.push(`${key} (name)`);
        const type = await r.type(key);
        let values: Buffer[] = [];
        if (type === 'string' && key.endsWith(':events-packed'))
          values = [Buffer.from(JSON.stringify(unpackEntries(await r.getBuffer(key))))];
        else if (type === 'string' && key.endsWith(':journal-packed'))
          values = unpackJournal(await r.getBuffer(key)).map((e) => Buffer.from(e));
        else if (type === 'string') values = [(await r.getBuffer(key)) ?? Buffer.alloc(0)];
        else if (type === 'hash') values = (await r.hvalsBuffer(key)).map(packedField);
        else if (type === 'list') values = (await r.lrangeBuffer(key, 0, -1)).map(entry);
        else if (type === 'set') values = await r.smembersBuffer(key);
        else if (type === 'zset') values = await r.zrangeBuffer(key, 0, -1);
        else if (type === 'stream') values = (await r.xrangeBuffer(key, '-', '+')).flatMap(([, fields]) => fields);
        if (values.some(has)) hits.push(key);
      }
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
  return hits;
}

/** Every text, json and jsonb column of every table of the archive that contains `needle`. */
export async function archiveHits(pool: ArchivePool, needle: string): Promise<string[]> {
  const cols = await pool.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = 'public' AND data_type IN ('text', 'json', 'jsonb', 'character varying')`,
  );
  const hits: string[] = [];
  for (const { table_name, column_name } of cols.rows) {
    const res = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${table_name}" WHERE strpos("${column_name}"::text, $1) > 0`,
      [needle],
    );
    if (Number(res.rows[0]!.n) > 0) hits.push(`${table_name}.${column_name}`);
  }
  return hits;
}
