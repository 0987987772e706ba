/**
 * A page over Redis and the archive (mergeArchivedPage): newest first by creation (a search) or by the last status
 * change (the listing), a run in both once (Redis' row), and a source with more beyond its page bounds the merged
 * page, so walking the cursor reads every run once.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeCursor,
  encodeCursor,
  mergeArchivedPage,
  type ArchivedPage,
  type RunPage,
  type RunRow,
} from '../../src/runs/list.js';

const id = (n: number) => `r_${n.toString(16).padStart(24, '0')}`;
const row = (n: number, status: RunRow['status'] = 'completed'): RunRow => ({
  runId: id(n),
  status,
  reason: '',
  tenant: 'acme',
  agent: 'support',
  step: 1,
  createdAt: n * 10,
  statusAt: n * 10,
  subject: 'T-1',
  cost: 0,
});
const newest = (rows: RunRow[]) => [...rows].sort((a, b) => b.createdAt - a.createdAt);

/** Pages of `rows` as a source answers: newest first, strictly after the cursor, `limit` of them. */
function source(rows: RunRow[], cursor: string | undefined, limit: number) {
  const after = cursor ? decodeCursor(cursor)! : undefined;
  const rest = newest(rows).filter((r) => !after || r.createdAt < after.at);
  return { page: rest.slice(0, limit), more: rest.length > limit };
}

describe('mergeArchivedPage', () => {
  it('lists a run in both stores once, with the Redis row', () => {
    const redis: RunPage = { runs: [row(3, 'running'), row(2)] };
    const archived: ArchivedPage = { runs: [row(3), row(1)], more: false };
    const page = mergeArchivedPage(redis, archived, 10, 'createdAt');
    expect(page.runs.map((r) => [r.runId, r.status])).toEqual([
      [id(3), 'running'],
      [id(2), 'completed'],
      [id(1), 'completed'],
    ]);
    expect(page.nextCursor).toBeUndefined();
  });

  it('walks two interleaved sources page by page, every run once, newest first', () => {
    // Redis examines a bounded number of entries a page: one whose run a filter skips still moves its cursor.
    const inRedis = [1, 4, 5, 8, 9, 12, 13, 14, 15, 16, 17].map((n) => row(n));
    const skipped = new Set([id(15), id(16), id(17)]);
    const inArchive = [2, 3, 5, 6, 7, 10, 11, 12].map((n) => row(n));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const r = source(inRedis, cursor, 3);
      const a = source(inArchive, cursor, 3);
      const examined = r.page.at(-1);
      const redis: RunPage = {
        runs: r.page.filter((x) => !skipped.has(x.runId)),
        ...(r.more && examined ? { nextCursor: encodeCursor({ at: examined.createdAt, runId: examined.runId }) } : {}),
      };
      const page = mergeArchivedPage(redis, { runs: a.page, more: a.more }, 3, 'createdAt');
      seen.push(...page.runs.map((x) => x.runId));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    const all = Array.from({ length: 14 }, (_, i) => id(14 - i));
    expect(seen).toEqual(all);
  });

  it("orders a listing by the last status change and leaves out the archive's copy of a run Redis still holds", () => {
    // Run 3 was archived as completed at 30, then retried: Redis lists it where it stands (running since 90).
    const redis: RunPage = { runs: [{ ...row(3, 'running'), statusAt: 90 }] };
    const archived = { runs: [{ ...row(5), statusAt: 50 }, row(3), { ...row(4), statusAt: 20 }], more: true };
    const page = mergeArchivedPage(redis, archived, 10, 'statusAt', new Set([id(3)]));
    expect(page.runs.map((r) => [r.runId, r.status, r.statusAt])).toEqual([
      [id(3), 'running', 90],
      [id(5), 'completed', 50],
      [id(4), 'completed', 20],
    ]);
    // The archive has more: the next page starts after its last row, by the listing's key.
    expect(decodeCursor(page.nextCursor!)).toEqual({ at: 20, runId: id(4) });
  });
});
