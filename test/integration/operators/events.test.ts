/** Live events over SSE: a client that disconnects mid-run and resumes with Last-Event-ID sees every event once. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../../testkit/harness.js';
import { readSse, type SseEvent } from '../../../testkit/sse.js';
import { readRunEvents } from '../../../testkit/runEvents.js';
import { call, email, final, OPERATOR_TOKEN, operatorHarness, refund, startScripted, turn } from './support.js';
import { until } from '../../../testkit/until.js';
import { ENDED_RETRY_MS, LIVE_RETRY_MS } from '../../../src/http/operators/events.js';

const VIEWER_CAP = 50;
const UNKNOWN_RUN = `r_${'0'.repeat(24)}`;
const ACME_TOKEN = 'acme-tenant-token-for-events';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('events', {
    SSE_MAX_VIEWERS: String(VIEWER_CAP),
    SSE_OPERATOR_RESERVE: '10',
    TENANT_TOKENS: JSON.stringify({ acme: ACME_TOKEN }),
  });
});
afterAll(async () => {
  await h.close();
});

/** Reads SSE events until `stopAfter` of them arrived (then aborts the connection) or the server ends the response. */
async function readEvents(
  runId: string,
  lastEventId: string | undefined,
  stopAfter = Infinity,
  onFirst?: () => void,
): Promise<{ events: SseEvent[]; ended: boolean; retry?: number }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 30_000);
  const res = await fetch(`${h.url}/v1/runs/${runId}/events`, {
    headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    signal: ac.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
  try {
    return await readSse(res, (events) => {
      if (events.length === 1) onFirst?.();
      return events.length >= stopAfter;
    });
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** Connections named like this harness's context (the SSE duplicates inherit the name). */
async function sseConnections(): Promise<number> {
  const list = (await h.ctx.redis.client('LIST')) as string;
  return list.split('\n').filter((l) => / name=events( |$)/.test(l)).length;
}

describe('live events (SSE)', () => {
  it('a client that disconnects mid-run and reconnects with Last-Event-ID receives every event once', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 150 }]);
    const emailTo = (n: number) => ({ ...email, args: { ...email.args, template: `update_${n}` } });
    const runId = await startScripted(h, [turn([emailTo(1)]), turn([emailTo(2)]), turn([emailTo(3)]), final], 'SSE');

    const baseline = await sseConnections();
    const first = await readEvents(runId, undefined, 2);
    expect(first.ended).toBe(false);
    // A stream of a run at work: a cut one is reopened soon.
    expect(first.retry).toBe(LIVE_RETRY_MS);
    expect(first.events[0]?.event).toBe('run_created');
    const statusAtDisconnect = await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status');
    expect(['queued', 'running']).toContain(statusAtDisconnect);

    const second = await readEvents(runId, first.events.at(-1)!.id);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 5000)).toBe('completed');
    expect(second.ended).toBe(true);
    // Ended with the run: a client (a browser's EventSource reopens every ended stream) comes back no sooner than this.
    expect(second.retry).toBe(ENDED_RETRY_MS);

    const all = [...first.events, ...second.events];
    const stored = (await readRunEvents(h.ctx, runId)).map((e) => e.id);
    expect(all.map((e) => e.id)).toEqual(stored);
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    expect(all.at(-1)).toMatchObject({ event: 'status_changed' });
    expect(JSON.parse(all.at(-1)!.data)).toMatchObject({ status: 'completed' });
    // Each client's dedicated connection is closed when it goes.
    await until('the dedicated connections closed', 3000, async () => (await sseConnections()) <= baseline);
    expect(await sseConnections()).toBe(baseline);
  });

  it('an entry holding several events: each event has its own id, and a resume from any of them gets exactly the rest, in order', async () => {
    const runId = await startScripted(h, [turn([email]), final], 'PACK');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 5000)).toBe('completed');
    const stored = await readRunEvents(h.ctx, runId);
    // The commits pack their events: at least one entry holds three or more (step_started, decision, step_committed).
    expect(stored.some((e) => e.id.endsWith('.2'))).toBe(true);
    const all = await readEvents(runId, undefined);
    expect(all.ended).toBe(true);
    expect(all.retry).toBe(ENDED_RETRY_MS);
    expect(all.events).toEqual(stored.map((e) => ({ id: e.id, event: e.type, data: e.data })));
    expect(new Set(all.events.map((e) => e.id)).size).toBe(stored.length);
    // From every event, the first of an entry, one in its middle, its last: nothing skipped, nothing repeated.
    for (let i = 0; i < stored.length - 1; i++) {
      const rest = await readEvents(runId, stored[i]!.id);
      expect(
        rest.events.map((e) => e.id),
        `resumed after ${stored[i]!.id}`,
      ).toEqual(stored.slice(i + 1).map((e) => e.id));
    }
  });

  it('refuses a malformed Last-Event-ID and an unknown run', async () => {
    const bad = await fetch(`${h.url}/v1/runs/${UNKNOWN_RUN}/events`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'last-event-id': 'nope' },
    });
    expect(bad.status).toBe(400);
    const missing = await fetch(`${h.url}/v1/runs/${UNKNOWN_RUN}/events`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(missing.status).toBe(404);
    expect((await fetch(`${h.url}/v1/runs/${UNKNOWN_RUN}/events`)).status).toBe(401);
  });

  it('a Last-Event-ID Redis would refuse (a part past 2^64-1, over 20 digits) is a 400 naming where it came from; the other viewers go on', async () => {
    // Someone else's viewer of a parked run: it must see its run to the end, whatever the tenant below sends.
    const watched = await startScripted(h, [turn([refund(10_000)]), turn([email]), final], 'CUT-W');
    await h.waitForStatus(watched, ['waiting_approval']);
    let seen!: () => void;
    const first = new Promise<void>((r) => (seen = r));
    const following = readEvents(watched, undefined, Infinity, seen);
    await first;

    const own = await startScripted(h, [turn([refund(10_000)]), final], 'CUT-O');
    await h.waitForStatus(own, ['waiting_approval']);
    const refused = [
      '99999999999999999999999-0',
      '18446744073709551616-0',
      '0-18446744073709551616',
      '1-123456789012345678901',
      '1700000000000-0.1234567890123456',
      '1700000000000-0.',
      '-1-0',
    ];
    for (const id of refused) {
      for (const [how, path] of [
        ['header', 'Last-Event-ID'],
        ['query', 'lastEventId'],
      ] as const) {
        const res = await fetch(
          `${h.url}/v1/runs/${own}/events${how === 'query' ? `?lastEventId=${encodeURIComponent(id)}` : ''}`,
          { headers: { authorization: `Bearer ${ACME_TOKEN}`, ...(how === 'header' ? { 'last-event-id': id } : {}) } },
        );
        expect(res.status, `${id} (${how})`).toBe(400);
        const body = (await res.json()) as { fields: { path: string }[] };
        expect(
          body.fields.map((f) => f.path),
          `${id} (${how})`,
        ).toEqual([path]);
      }
    }
    // The largest id Redis holds is one: nothing follows it (an ended run's stream then ends at once).
    const ended = await startScripted(h, [final], 'CUT-E');
    expect(await h.waitForStatus(ended, ['completed', 'failed'])).toBe('completed');
    const last = await readEvents(ended, '18446744073709551615-18446744073709551615');
    expect(last).toMatchObject({ events: [], ended: true });
    const padded = await readEvents(ended, '00000000000000000000-0');
    expect(padded.events.map((e) => e.id)).toEqual((await readRunEvents(h.ctx, ended)).map((e) => e.id));

    await approve(watched);
    const result = await following;
    expect(result.ended).toBe(true);
    expect(JSON.parse(result.events.at(-1)!.data)).toMatchObject({ status: 'completed' });
    expect(result.events.map((e) => e.id)).toEqual((await readRunEvents(h.ctx, watched)).map((e) => e.id));
  });

  it("a stream Redis refuses to read ends its own viewers only: another run's viewer follows its run to the end", async () => {
    const watched = await startScripted(h, [turn([refund(10_000)]), turn([email]), final], 'ISO-W');
    const broken = await startScripted(h, [turn([refund(10_000)]), final], 'ISO-B');
    await h.waitForStatus(watched, ['waiting_approval']);
    await h.waitForStatus(broken, ['waiting_approval']);
    const follow = (runId: string) => {
      let seen!: () => void;
      const first = new Promise<void>((r) => (seen = r));
      return { first, done: readEvents(runId, undefined, Infinity, seen) };
    };
    const w = follow(watched);
    const b = follow(broken);
    await Promise.all([w.first, b.first]);

    // The broken run's stream is no stream any more: the shared XREAD over both is refused (WRONGTYPE) at every try.
    const events = h.ctx.keys.run(broken).events;
    await h.ctx.redis.multi().del(events).set(events, 'not a stream').exec();
    // A new viewer wakes the blocked read, which now names the broken stream.
    const woken = await startScripted(h, [turn([refund(10_000)]), final], 'ISO-N');
    await h.waitForStatus(woken, ['waiting_approval']);
    const n = follow(woken);
    await n.first;

    const cut = await b.done;
    expect(cut.ended).toBe(true);
    expect(cut.events.some((e) => e.event === 'status_changed' && e.data.includes('completed'))).toBe(false);
    // Past the five tries that used to fail every viewer of the shard: the others are still served.
    await new Promise((r) => setTimeout(r, 1500));
    await approve(watched);
    const result = await w.done;
    expect(JSON.parse(result.events.at(-1)!.data)).toMatchObject({ status: 'completed' });
    expect(result.events.map((e) => e.id)).toEqual((await readRunEvents(h.ctx, watched)).map((e) => e.id));
    await approve(woken);
    expect(JSON.parse((await n.done).events.at(-1)!.data)).toMatchObject({ status: 'completed' });
    await h.ctx.redis.del(events);
  });

  it(`${VIEWER_CAP} viewers share one Redis reader, viewer ${VIEWER_CAP + 1} gets 503 naming the limit, every viewer gets every event`, async () => {
    // A refund that waits for approval parks the run: the viewers join while nothing moves.
    const runId = await startScripted(h, [turn([refund(10_000)]), turn([email]), final], 'FAN');
    await h.waitForStatus(runId, ['waiting_approval']);
    const baseline = await sseConnections();

    const live: { first: Promise<unknown>; done: Promise<{ events: SseEvent[]; ended: boolean }> }[] = [];
    for (let i = 0; i < VIEWER_CAP; i++) {
      let seen!: () => void;
      const first = new Promise<void>((r) => (seen = r));
      live.push({ first, done: readEvents(runId, undefined, Infinity, seen) });
    }
    await Promise.all(live.map((v) => v.first));
    expect(await sseConnections()).toBeLessThanOrEqual(baseline + 1);

    const refused = await fetch(`${h.url}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(refused.status).toBe(503);
    const body = (await refused.json()) as { error: string; limit: string; max: number; message: string };
    expect(body).toMatchObject({ error: 'too_many_viewers', limit: 'SSE_MAX_VIEWERS', max: VIEWER_CAP });
    expect(body.message).toContain('SSE_MAX_VIEWERS');

    const pending = await call<{ approvals: { runId: string; actionId: string; fingerprint: string }[] }>(
      h.url,
      'GET',
      '/v1/approvals',
    );
    const p = pending.body.approvals.find((a) => a.runId === runId)!;
    expect(
      (
        await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
          decision: 'approve',
          fingerprint: p.fingerprint,
          approver: 'alice',
        })
      ).status,
    ).toBe(200);

    const results = await Promise.all(live.map((v) => v.done));
    const stored = (await readRunEvents(h.ctx, runId)).map((e) => e.id);
    expect(JSON.parse(results[0]!.events.at(-1)!.data)).toMatchObject({ status: 'completed' });
    for (const r of results) {
      expect(r.ended).toBe(true);
      expect(r.events.map((e) => e.id)).toEqual(stored);
    }
    // The viewers are gone: so is the reader, and a new viewer is served again (resuming mid-stream).
    await until('the dedicated connections closed', 3000, async () => (await sseConnections()) <= baseline);
    expect(await sseConnections()).toBe(baseline);
    const resumed = await readEvents(runId, stored[1]);
    expect(resumed.events.map((e) => e.id)).toEqual(stored.slice(2));
  });
});

/** Approves the run's pending approval (the run waits for it). */
async function approve(runId: string): Promise<void> {
  const pending = await call<{ approvals: { runId: string; actionId: string; fingerprint: string }[] }>(
    h.url,
    'GET',
    '/v1/approvals',
  );
  const p = pending.body.approvals.find((a) => a.runId === runId)!;
  const res = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
    decision: 'approve',
    fingerprint: p.fingerprint,
  });
  expect(res.status).toBe(200);
}
