/**
 * Schedules through the real entry points: the API takes a per-second schedule, two real
 * worker processes both run the tick worker, and each tick starts exactly one run (the run id
 * derives from the tick's time), with the tick as the run's event. An operator pauses it: no
 * tick after that starts a run; resume brings it back. A 4xx names the field and writes nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { until } from '../../testkit/until.js';

const OPERATOR_TOKEN = 'operator-token-for-tests';
let h: Harness;
let url: string;
const workers: WorkerProcess[] = [];

beforeEach(async () => {
  // Per-second ticks: the shortest interval a deployment may allow.
  h = await createHarness('schedules', { OPERATOR_TOKEN, SCHEDULE_MIN_INTERVAL_MS: '1000' });
  ({ url } = await h.startApi());
});
afterEach(async () => {
  for (const w of workers.splice(0)) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await h.close();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
  auth = producerAuth,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...auth },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}
const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` };

/** Each tick of a schedule, from the log lines across the workers: tick ms -> runs created for it. */
function ticks(schedule = 'every-second'): Map<number, { created: number; runIds: Set<string> }> {
  const out = new Map<number, { created: number; runIds: Set<string> }>();
  for (const w of workers) {
    for (const line of w.lines) {
      if (!line.includes('"schedule_tick"')) continue;
      const e = JSON.parse(line) as { schedule: string; tickAt: number; runId: string; created: boolean };
      if (e.schedule !== schedule) continue;
      const t = out.get(e.tickAt) ?? { created: 0, runIds: new Set<string>() };
      if (e.created) t.created++;
      t.runIds.add(e.runId);
      out.set(e.tickAt, t);
    }
  }
  return out;
}

describe('schedules', () => {
  it('refuses a bad pattern or input with the field named, and writes nothing', async () => {
    const bad = await call('PUT', '/v1/schedules/nightly', {
      tenant: 'acme',
      agent: 'support',
      cron: 'every day',
      input: sampleTicket('S-1'),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.fields).toEqual([{ path: 'cron', message: expect.any(String) }]);
    const badInput = await call('PUT', '/v1/schedules/nightly', {
      tenant: 'acme',
      agent: 'support',
      cron: '0 3 * * *',
      input: { id: 'x' },
    });
    expect(badInput.status).toBe(400);
    expect((badInput.body.fields as { path: string }[])[0]!.path).toMatch(/^input\./);
    expect(await h.ctx.redis.hlen(h.ctx.keys.schedules())).toBe(0);
  });

  it("two worker processes tick one schedule: one run per tick, the tick as the run's event; paused, no run", async () => {
    workers.push(await spawnWorker(h.env), await spawnWorker(h.env));
    const put = await call('PUT', '/v1/schedules/every-second', {
      tenant: 'acme',
      agent: 'support',
      cron: '* * * * * *',
      input: sampleTicket('S-2'),
    });
    expect(put.status).toBe(200);
    const listed = await call('GET', '/v1/schedules', undefined, operator);
    expect(listed.body.schedules).toEqual([
      expect.objectContaining({ id: 'every-second', tenant: 'acme', paused: false, nextTickAt: expect.any(Number) }),
    ]);

    await until('three ticks', 20_000, () => ticks().size >= 3);
    // A schedule left running beside it: its ticks after the pause show the paused one had its turns too.
    const control = { tenant: 'beta', agent: 'support', cron: '* * * * * *', input: sampleTicket('S-3') };
    expect((await call('PUT', '/v1/schedules/control', control)).status).toBe(200);
    await until('a tick of the schedule left running', 20_000, () => ticks('control').size >= 1);
    const paused = await call('POST', '/v1/schedules/acme/every-second/pause', undefined, operator);
    expect(paused.body.paused).toBe(true);
    const atPause = new Set(ticks().keys());
    const controlAtPause = ticks('control').size;
    // Two ticks of the other schedule later: a tick already queued at the pause may still start; none after it.
    await until(
      'two more ticks of the schedule left running',
      20_000,
      () => ticks('control').size >= controlAtPause + 2,
    );
    const after = [...ticks().keys()].filter((t) => !atPause.has(t));
    expect(after.length).toBeLessThanOrEqual(1);

    for (const [tickAt, t] of ticks()) {
      expect(t.created, `tick ${tickAt}`).toBe(1);
      expect(t.runIds.size).toBe(1);
      const runId = [...t.runIds][0]!;
      const spec = await h.ctx.store.readSpec(runId);
      expect(spec?.event).toBe(`schedule:every-second:${tickAt}`);
    }
    const list = await call('GET', '/v1/schedules?tenant=acme', undefined, operator);
    expect(list.body.schedules).toEqual([expect.objectContaining({ id: 'every-second', paused: true })]);
    expect((list.body.schedules as Record<string, unknown>[])[0]!.nextTickAt).toBeUndefined();

    const resumed = await call('POST', '/v1/schedules/acme/every-second/resume', undefined, operator);
    expect(resumed.body.paused).toBe(false);
    const before = ticks().size;
    await until('another tick', 20_000, () => ticks().size > before);
    expect((await call('DELETE', '/v1/schedules/acme/every-second', undefined, operator)).status).toBe(204);
    expect((await call('DELETE', '/v1/schedules/beta/control', undefined, operator)).status).toBe(204);
  }, 60_000);
});
