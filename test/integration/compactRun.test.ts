/**
 * An ended run is compacted (src/runs/compact.ts, by the reconciler's compactor: src/runs/compactor.ts): its events packed beside an emptied stream, its spec packed, its
 * ledger histories folded into the records. Every reader sees the run as before: the run view (effects with every
 * move), the spec, every event with its id, a Last-Event-ID resume from the middle, an event appended after the end
 * (it follows the packed ones), and a second compaction that takes it in. A short run's compaction reads it by one
 * script, a long run's by a MULTI, and either packs it the same.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Harness } from '../../testkit/harness.js';
import { readSse } from '../../testkit/sse.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { compareEntryIds, parseEventId, readEventsAfter, unpackEntries } from '../../src/store/runEvents.js';
import { compactEndedRun } from '../../src/runs/compact.js';
import { Compactor } from '../../src/runs/compactor.js';
import { unpackJournal } from '../../src/core/journal.js';
import { unpackSpec } from '../../src/store/runRecord.js';
import { foldHistoryCall, historyDigest } from '../../src/store/calls/foldHistory.js';
import { foldMoves } from '../../src/store/ledgerHistory.js';
import { call, email, final, OPERATOR_TOKEN, operatorHarness, startScripted, turn } from './operators/support.js';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('compact');
});
afterAll(async () => {
  await h.close();
});

async function sse(runId: string, lastEventId: string): Promise<{ id: string; event: string }[]> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 20_000);
  const res = await fetch(`${h.url}/v1/runs/${runId}/events`, {
    headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'last-event-id': lastEventId },
    signal: ac.signal,
  });
  try {
    return (await readSse(res, () => false)).events.map((e) => ({ id: e.id, event: e.event }));
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

describe('an ended run, compacted', () => {
  it('keeps every event, move and the spec for its readers, in less space', async () => {
    const runId = await startScripted(h, [turn([email]), final], 'CMP');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 15_000)).toBe('completed');
    const k = h.ctx.keys.run(runId);
    const r = h.ctx.redis;

    // Queued for its compaction by the commit that ended it, compacted by the reconciler's compactor.
    const queue = h.ctx.keys.compactQueue(h.ctx.keys.shardOf(runId));
    expect(await r.zscore(queue, runId)).not.toBeNull();
    expect(await r.xlen(k.events)).toBeGreaterThan(0);
    await new Compactor(h.ctx).drain();
    expect(await r.zscore(queue, runId)).toBeNull();
    expect(await r.xlen(k.events)).toBe(0);
    expect(await r.exists(k.eventsPacked)).toBe(1);
    expect(await r.pttl(k.eventsPacked)).toBeGreaterThan(0);
    const [actionKey] = await r.smembers(k.actions);
    expect(await r.exists(h.ctx.keys.actionHistory(actionKey!))).toBe(0);
    expect(await r.hget(actionKey!, 'history')).toMatch(/^~/);
    // The reservation let go, the record naming the idempotency key it held.
    const [reservation, idempotencyKey] = await r.hmget(actionKey!, 'reservationKey', 'idempotencyKey');
    expect(reservation).toMatch(/:idem:/);
    expect(await r.exists(reservation!)).toBe(0);
    expect(idempotencyKey).toBeTruthy();

    // The readers: every event in order with its id, the view's effects with every move, the spec.
    const events = await readRunEvents(h.ctx, runId);
    expect(events[0]!.type).toBe('run_created');
    expect(events.at(-1)!.type).toBe('status_changed');
    expect(events.filter((e) => e.type === 'effect').map((e) => JSON.parse(e.data).to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'confirmed',
    ]);
    for (let i = 1; i < events.length; i++)
      expect(compareEntryIds(events[i - 1]!.entry, events[i]!.entry)).toBeLessThanOrEqual(0);
    const view = await call<{ effects: { history: { to: string }[] }[] }>(h.url, 'GET', `/v1/runs/${runId}`);
    expect(view.body.effects[0]!.history.map((m) => m.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'confirmed',
    ]);
    const spec = await h.ctx.store.readSpec(runId);
    expect(spec?.runId).toBe(runId);

    // A resume from the middle gets exactly the rest, over SSE too.
    const mid = events[Math.floor(events.length / 2)]!;
    const rest = await readEventsAfter(r, k, parseEventId(mid.id)!, 100);
    expect(rest.events.map((e) => e.id)).toEqual(events.slice(events.indexOf(mid) + 1).map((e) => e.id));
    expect((await sse(runId, mid.id)).map((e) => e.id)).toEqual(rest.events.map((e) => e.id));

    // An event after the end follows the packed ones; compacting again takes it in, ids unchanged.
    const later = await r.xadd(k.events, '*', 'type', 'operator_action', 'data', '{"action":"note"}');
    const withLater = await readRunEvents(h.ctx, runId);
    expect(withLater.map((e) => e.id)).toEqual([...events.map((e) => e.id), later]);
    expect((await h.ctx.store.compactEnded(runId)).run).toBe(true);
    expect(await r.xlen(k.events)).toBe(0);
    expect((await readRunEvents(h.ctx, runId)).map((e) => e.id)).toEqual(withLater.map((e) => e.id));
  });

  it('reads a run by commands, not one atomic read: a part that moves between the reads is refused, then packed', async () => {
    const runId = await startScripted(h, [turn([email]), final], 'CMPREAD');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 15_000)).toBe('completed');
    const r = h.ctx.redis;
    const k = h.ctx.keys.run(runId);
    await new Compactor(h.ctx).drain();
    expect(await r.exists(k.journalPacked)).toBe(1);
    // The run as it was before its compaction, under two more run ids.
    const entries = unpackJournal(await r.getBuffer(k.journalPacked));
    const events = unpackEntries(await r.getBuffer(k.eventsPacked));
    const spec = unpackSpec((await r.hget(k.run, 'spec'))!);
    const copies = [`${runId}a`, `${runId}b`];
    for (const id of copies) {
      const c = h.ctx.keys.run(id);
      await r.copy(k.run, c.run);
      await r.hset(c.run, 'spec', spec);
      await r.rpush(c.journal, ...entries);
      for (const [entryId, fields] of events) await r.xadd(c.events, entryId, ...fields);
    }
    const own = r.duplicate();
    try {
      expect((await compactEndedRun(own, h.ctx.keys, copies[0]!)).run).toBe(true);
      // An event appended right after the stream was read is caught by the packing script's fence (the stream's last
      // id and length): nothing is written, and the next pass packs it too.
      const xrange = vi.spyOn(own, 'xrange');
      const late = h.ctx.keys.run(copies[1]!).events;
      xrange.mockImplementationOnce(async (key: unknown) => {
        const read = await r.xrange(key as string, '-', '+');
        await r.xadd(late, '*', 'type', 'operator_action', 'data', '{"action":"note","by":"test"}');
        return read;
      });
      expect(await compactEndedRun(own, h.ctx.keys, copies[1]!)).toMatchObject({ run: false, outcome: 'changed' });
      expect(await r.exists(h.ctx.keys.run(copies[1]!).eventsPacked)).toBe(0);
      expect((await compactEndedRun(own, h.ctx.keys, copies[1]!)).run).toBe(true);
      const packedLate = unpackEntries(await r.getBuffer(h.ctx.keys.run(copies[1]!).eventsPacked));
      expect(packedLate).toHaveLength(events.length + 1);
      expect(packedLate.at(-1)![1]).toContain('operator_action');
    } finally {
      own.disconnect();
    }
    // The copy packs to the very bytes the run itself packed to.
    const stored = async (id: string) => {
      const c = h.ctx.keys.run(id);
      return [await r.getBuffer(c.eventsPacked), await r.getBuffer(c.journalPacked), await r.hget(c.run, 'spec')];
    };
    expect(await stored(copies[0]!)).toEqual(await stored(runId));
  });
});

describe("folding an action's history", () => {
  it('is refused when the list was rewritten in place since it was read (an erasure), not only when it grew', async () => {
    const actionKey = h.ctx.keys.action('r_foldrace', 'a_foldrace');
    const historyKey = h.ctx.keys.actionHistory(actionKey);
    await h.ctx.redis.hset(actionKey, 'state', 'confirmed');
    await h.ctx.redis.rpush(historyKey, '{"to":"planned","detail":"ada@example.com"}', '{"to":"confirmed"}');
    const read = await h.ctx.redis.lrange(historyKey, 0, -1);
    const fold = (listed: string[]) =>
      foldHistoryCall(h.ctx.redis, actionKey, historyKey, {
        listDigest: historyDigest(listed),
        foldedSha1: '',
        folded: foldMoves(listed),
        reservation: historyKey,
        actionId: 'a_foldrace',
      });
    // An erasure rewrites the first move, as many entries as before.
    await h.ctx.redis.lset(historyKey, 0, '{"to":"planned","detail":"[erased]"}');
    expect(await fold(read)).toBe(false);
    expect(await h.ctx.redis.hget(actionKey, 'history')).toBeNull();
    expect(await h.ctx.redis.llen(historyKey)).toBe(2);
    // What it finds now folds.
    expect(await fold(await h.ctx.redis.lrange(historyKey, 0, -1))).toBe(true);
    expect(await h.ctx.redis.exists(historyKey)).toBe(0);
    expect(await h.ctx.redis.hget(actionKey, 'history')).not.toContain('ada@example.com');
  });
});
