/**
 * Flow control and woken runs: a run parked on a wait gave its slot back, so when its wait ends it waits for a slot
 * like any run (at the front of its tenant's line) and its next step does not run before it has one. Under a tenant
 * limit of 2, ten runs woken together (ten events delivered at once, ten sleeps ending at one instant) never have
 * more than 2 at work: neither the flow's counter nor the runs `running` go above it, and every run completes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { startRun } from '../../src/producer/intake.js';
import { deliver } from '../../src/producer/events.js';
import { sampleAtWork } from '../fixtures/flowAtWork.js';
import { StuckRuns } from '../../src/runs/stuckRuns.js';
import { childRunsOf } from '../../src/runs/children.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const RUNS = 10;
const usage = { promptTokens: 10, completionTokens: 2 };
const transientFailures = 0;
let h: Harness;

beforeAll(async () => {
  h = await createHarness('flowwakes', {
    AGENTS_MODULE: 'test/fixtures/flowWaitAgents.ts',
    FLOW_CONTROL: 'true',
    FLOW_TENANT_CONCURRENCY: '2',
    FLOW_SWEEP_MS: '200',
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

let n = 0;
async function start(tenant: string, first: { name: string; args: Record<string, unknown> }): Promise<string> {
  const script = [
    { toolCalls: [first], usage, transientFailures },
    { toolCalls: [{ name: 'work', args: { ms: 300 } }], usage, transientFailures },
    { toolCalls: [], final: 'done', usage, transientFailures },
  ];
  const id = `W-${++n}`;
  const r = await startRun(h.ctx, { tenant, agent: 'flow-a', input: { id }, model: 'scripted', script }, `k-${id}`);
  return r.runId;
}

const statusOf = async (runId: string) => (await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')) ?? '';
const allIn = async (runIds: string[], status: string) =>
  (await Promise.all(runIds.map(statusOf))).every((s) => s === status);

describe('woken runs under a tenant limit', { timeout: 90_000 }, () => {
  it('ten events delivered at once: at most 2 at work, all complete', async () => {
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++)
      runIds.push(await start('ev', { name: 'wait_for', args: { key: `e${i}`, timeoutSeconds: 120 } }));
    await until('ten runs waiting for their event', 30_000, () => allIn(runIds, 'waiting_event'));
    const sampler = sampleAtWork(h.ctx, { tenants: ['ev'], agents: [] }, 5);
    await Promise.all(
      runIds.map((_, i) => deliver(h.ctx, { tenant: 'ev', agent: 'flow-a', key: `e${i}`, payload: { i } })),
    );
    await until('ten runs completed', 60_000, () => allIn(runIds, 'completed'));
    const seen = await sampler.stop();
    expect(seen.counters['t:ev']).toBeLessThanOrEqual(2);
    expect(seen.running['t:ev']).toBeLessThanOrEqual(2);
    expect(seen.running['t:ev']).toBeGreaterThanOrEqual(1);
    await until(
      'no slot left held',
      10_000,
      async () => Number((await h.ctx.redis.hget(h.ctx.keys.flow().counts, 't:ev')) ?? 0) === 0,
    );
  });

  it('ten sleeps ending at one instant: at most 2 at work, all complete', async () => {
    const at = Date.now() + 4000;
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) runIds.push(await start('sl', { name: 'sleep_until', args: { untilMs: at } }));
    await until('ten runs sleeping', 30_000, () => allIn(runIds, 'sleeping'));
    const sampler = sampleAtWork(h.ctx, { tenants: ['sl'], agents: [] }, 5);
    await until('ten runs completed', 60_000, () => allIn(runIds, 'completed'));
    const seen = await sampler.stop();
    expect(seen.counters['t:sl']).toBeLessThanOrEqual(2);
    expect(seen.running['t:sl']).toBeLessThanOrEqual(2);
    expect(seen.running['t:sl']).toBeGreaterThanOrEqual(1);
  });

  it('a parent whose children ended waits in line for its slot; the stuck-run sweep leaves it there', async () => {
    const { ctx } = h;
    const script = [
      { toolCalls: [{ name: 'hand_off', args: { id: 'C-1' } }], usage, transientFailures },
      { toolCalls: [], final: 'done', usage, transientFailures },
    ];
    const { runId } = await startRun(
      ctx,
      { tenant: 'ch', agent: 'flow-a', input: { id: 'P-1' }, model: 'scripted', script },
      'k-P-1',
    );
    const [childId] = await until('the child started', 20_000, async () => {
      const c = await childRunsOf(ctx).childrenOf(runId);
      return c.length > 0 && c;
    });
    // While the child works (1.5 s), a run of the tenant holds a slot by a person's decision (past the limit of 2):
    // once the child ends, the tenant has no slot free for its parent.
    await until(
      'the child admitted',
      20_000,
      async () => (await ctx.redis.hexists(ctx.keys.flow().held, childId!)) === 1,
    );
    await ctx.admission!.hold({ runId: 'r_blocker1', tenant: 'ch', agent: 'flow-b' }, Date.now());
    await ctx.admission!.hold({ runId: 'r_blocker2', tenant: 'ch', agent: 'flow-b' }, Date.now());
    await until('the woken parent in line', 20_000, async () => {
      const waiting = await ctx.redis.hexists(ctx.keys.flow().waiting, runId);
      return waiting === 1 && (await statusOf(childId!)) === 'completed';
    });
    expect(await statusOf(runId)).toBe('waiting_child');
    // Its children ended, its job waits for its admission: not a lost wake for the sweep to recover.
    const stuck = new StuckRuns({ ...ctx, cfg: { ...ctx.cfg, STUCK_RUN_MIN_AGE_MS: 0 }, children: childRunsOf(ctx) });
    await stuck.sweep(Date.now() + 1000);
    expect((await readRunEvents(ctx, runId)).map((e) => e.type)).not.toContain('wake_recovered');
    expect(await statusOf(runId)).toBe('waiting_child');
    await ctx.admission!.release('r_blocker1');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    await ctx.admission!.release('r_blocker2');
  });
});
