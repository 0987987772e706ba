/** The shared event reader on its own: streams added while it blocks, resumes, leaving. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventFanout } from '../../../src/http/operators/eventFanout.js';
import { parseEventId, STREAM_START, type RunEvent } from '../../../src/store/runEvents.js';
import { createHarness, type Harness } from '../../../testkit/harness.js';
import { until } from '../../../testkit/until.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('fanout');
});
afterAll(async () => {
  await h.close();
});

const runA = `r_${'a'.repeat(24)}`;
const runB = `r_${'b'.repeat(24)}`;

function sink() {
  const got: RunEvent[] = [];
  const waiters: (() => void)[] = [];
  return {
    got,
    sink: {
      write: (e: RunEvent[]) => {
        got.push(...e);
        waiters.splice(0).forEach((w) => w());
      },
      idle: () => {},
      fail: (err: unknown) => {
        throw err;
      },
    },
    async until(n: number) {
      while (got.length < n) await new Promise<void>((r) => waiters.push(r));
    },
  };
}

const add = (runId: string, n: number) =>
  h.ctx.redis.xadd(h.ctx.keys.run(runId).events, '*', 'type', 'test', 'data', String(n));

describe('EventFanout', () => {
  it(
    'a stream added while the reader blocks is read at once (the reader is woken), a resume starts after its id',
    { timeout: 20_000 },
    async () => {
      // A block far longer than the test: only the wake can bring runB's live entries.
      const fanout = new EventFanout(h.ctx.redis, h.ctx.keys, h.ctx.log, { blockMs: 600_000, maxViewers: 10 });
      await add(runA, 1);
      const a = sink();
      const va = await fanout.join(runA, STREAM_START, a.sink);
      await a.until(1);
      await add(runA, 2);
      await a.until(2); // the reader is now blocked on runA's stream

      const firstB = await add(runB, 1);
      const b = sink();
      const vb = await fanout.join(runB, STREAM_START, b.sink);
      await b.until(1);
      await add(runB, 2);
      await b.until(2);
      expect(b.got.map((e) => e.data)).toEqual(['1', '2']);

      const resumed = sink();
      const vr = await fanout.join(runB, parseEventId(firstB!)!, resumed.sink);
      await resumed.until(1);
      await add(runB, 3);
      await Promise.all([b.until(3), resumed.until(2)]);
      expect(resumed.got.map((e) => e.data)).toEqual(['2', '3']);
      expect(a.got.map((e) => e.data)).toEqual(['1', '2']);
      expect(fanout.viewers).toBe(3);
      for (const v of [va, vb, vr]) v!.leave();
      expect(fanout.viewers).toBe(0);
    },
  );

  it('expands packed entries live and on catch-up; a resume inside an entry gets the rest of it, then the later entries', async () => {
    const runC = `r_${'c'.repeat(24)}`;
    const stream = h.ctx.keys.run(runC).events;
    const fanout = new EventFanout(h.ctx.redis, h.ctx.keys, h.ctx.log, { blockMs: 600_000, maxViewers: 10 });
    const packed = await h.ctx.redis.xadd(
      stream,
      '*',
      'type',
      'a',
      'data',
      '1',
      'type',
      'b',
      'data',
      '2',
      'type',
      'c',
      'data',
      '3',
    );
    const live = sink();
    const vl = await fanout.join(runC, STREAM_START, live.sink);
    await live.until(3);
    await h.ctx.redis.xadd(stream, '*', 'type', 'd', 'data', '4', 'type', 'e', 'data', '5');
    await live.until(5);
    expect(live.got.map((e) => [e.id, e.type, e.data])).toEqual([
      [`${packed}.0`, 'a', '1'],
      [`${packed}.1`, 'b', '2'],
      [`${packed}.2`, 'c', '3'],
      [expect.stringMatching(/^\d+-\d+\.0$/), 'd', '4'],
      [expect.stringMatching(/^\d+-\d+\.1$/), 'e', '5'],
    ]);

    const resumed = sink();
    const vr = await fanout.join(runC, parseEventId(`${packed}.0`)!, resumed.sink);
    await resumed.until(4);
    expect(resumed.got.map((e) => e.id)).toEqual(live.got.slice(1).map((e) => e.id));
    for (const v of [vl, vr]) v!.leave();
  });

  it('a cursor Redis refuses fails its own viewer only: the shared read goes on for the others', async () => {
    const runD = `r_${'d'.repeat(24)}`;
    const runE = `r_${'e'.repeat(24)}`;
    const fanout = new EventFanout(h.ctx.redis, h.ctx.keys, h.ctx.log, { blockMs: 600_000, maxViewers: 10 });
    const failed: string[] = [];
    const failing = (name: string) => {
      const s = sink();
      return { ...s, sink: { ...s.sink, fail: () => void failed.push(name) } };
    };
    await add(runD, 1);
    const d = failing('d');
    const vd = await fanout.join(runD, STREAM_START, d.sink);
    await d.until(1);
    // A position no route lets through (parseEventId refuses it): here it reaches XRANGE and the shared XREAD.
    const bad = failing('bad');
    const vb = await fanout.join(runE, { entry: '99999999999999999999999-0', index: Infinity }, bad.sink);
    await until('the refused viewer failed', 5000, async () => failed.includes('bad'));
    // Past the five tries that used to fail every viewer of the shard.
    await new Promise((r) => setTimeout(r, 1500));
    expect(failed).not.toContain('d');
    await add(runD, 2);
    await d.until(2);
    expect(d.got.map((e) => e.data)).toEqual(['1', '2']);
    vb!.leave();
    vd!.leave();
    expect(fanout.viewers).toBe(0);
  });

  it('refuses a viewer past maxViewers', async () => {
    const fanout = new EventFanout(h.ctx.redis, h.ctx.keys, h.ctx.log, { blockMs: 1000, maxViewers: 1 });
    const first = await fanout.join(runA, STREAM_START, sink().sink);
    expect(first).toBeDefined();
    expect(await fanout.join(runA, STREAM_START, sink().sink)).toBeUndefined();
    first!.leave();
    const again = await fanout.join(runA, STREAM_START, sink().sink);
    expect(again).toBeDefined();
    again!.leave();
  });
});
