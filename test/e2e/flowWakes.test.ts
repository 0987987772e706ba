/**
 * Woken runs under flow control, in real worker processes (AGENTS_MODULE test/fixtures/flowWaitAgents.ts).
 *
 * A stale release: a worker that parked a run on a short sleep stops (a synchronous pause point) after its commit,
 * before it gives the run's slot back; the reconciler re-creates the due wake job, another worker wakes the run and
 * runs its next step; then the parking worker resumes and releases. Its release is older than the wake's hold (the
 * slot is recorded with the generation it was taken for): the woken run keeps its slot for the whole step.
 *
 * A kill loop: runs of two tenants and two agents that wait for events (delivered in batches, all waiting runs at
 * once) and sleep until one instant, under a tenant, an agent and a fleet limit, with three worker processes
 * SIGKILLed at random. The most runs at work, sampled from Redis every 50 ms (the flow's counters and the runs
 * `running`), never goes above any limit, and every run completes with its event taken once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ObservationEntry } from '../../src/core/journal.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { deliver } from '../../src/producer/events.js';
import { startRun } from '../../src/producer/intake.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { killSpawned, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { until } from '../../testkit/until.js';
import { sampleAtWork } from '../fixtures/flowAtWork.js';

const AGENTS_MODULE = 'test/fixtures/flowWaitAgents.ts';
const usage = { promptTokens: 10, completionTokens: 2 };
const transientFailures = 0;
const turn = (name: string, args: Record<string, unknown>) => ({
  toolCalls: [{ name, args }],
  usage,
  transientFailures,
});
const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];

let h: Harness | undefined;
let reconciler: Reconciler | undefined;
const workers = new Set<WorkerProcess>();
afterEach(async () => {
  await reconciler?.stop();
  reconciler = undefined;
  await killSpawned(); // replacements still starting too
  workers.clear();
  await h?.close();
  h = undefined;
});

async function statusOf(harness: Harness, runId: string): Promise<string> {
  return (await harness.ctx.redis.hget(harness.ctx.keys.run(runId).run, 'status')) ?? '';
}

describe('woken runs under flow control', () => {
  it('a release older than the wake cannot free the woken run’s slot', { timeout: 90_000 }, async () => {
    const harness = (h = await createHarness('flowwakerace', {
      AGENTS_MODULE,
      FLOW_CONTROL: 'true',
      FLOW_TENANT_CONCURRENCY: '2',
      STUCK_RUN_MIN_AGE_MS: '300',
      RECONCILER_SWEEP_MS: '200',
    }));
    const { ctx } = harness;
    // The parking worker: stops 5 s right after step 1's commit, before its wake job and its release.
    const parker = await spawnWorker({ ...harness.env, PAUSE_POINTS: 'after_commit@1=5000' });
    workers.add(parker);
    const script = [
      turn('sleep_until', { untilMs: Date.now() + 1500 }),
      turn('work', { ms: 6000 }),
      { toolCalls: [], final: 'done', usage, transientFailures },
    ];
    const { runId } = await startRun(
      ctx,
      { tenant: 'race', agent: 'flow-a', input: { id: 'R-1' }, model: 'scripted', script },
      'race-1',
    );
    expect(await harness.waitForStatus(runId, ['sleeping'])).toBe('sleeping');
    // The waker: this process's worker, and the reconciler that re-creates the missing wake job.
    reconciler = new Reconciler(ctx, 'reconciler:flowwakerace');
    reconciler.start();
    await harness.startWorker();
    let ranWithoutSlot = 0;
    let samples = 0;
    // Sampled until the run ends: each sample of it running without a slot counts.
    await until(`run ${runId} ended`, 60_000, async () => {
      const [status, held] = ((await ctx.redis
        .multi()
        .hget(ctx.keys.run(runId).run, 'status')
        .hexists(ctx.keys.flow().held, runId)
        .exec()) ?? []) as [Error | null, unknown][];
      samples++;
      if (status?.[1] === 'running' && held?.[1] === 0) ranWithoutSlot++;
      return ENDED.includes(String(status?.[1]));
    });
    expect(await statusOf(harness, runId)).toBe('completed');
    const woke = (await readRunEvents(ctx, runId)).filter((e) => e.type === 'woke');
    expect(woke).toHaveLength(1);
    // The parker's late release came while the run worked: its pause ended (it logged the park, after the release)
    // before the 6 s step did.
    expect(parker.lines.some((l) => l.includes('"code":"run_sleeping"'))).toBe(true);
    expect({ ranWithoutSlot, sampled: samples > 0 }).toEqual({ ranWithoutSlot: 0, sampled: true });
    await until(
      'the slot back',
      10_000,
      async () => Number((await ctx.redis.hget(ctx.keys.flow().counts, 't:race')) ?? 0) === 0,
    );
  });

  it(
    'kill loop: waits and sleeps never take a run past a tenant, agent or fleet limit',
    { timeout: 150_000 },
    async () => {
      const LIMITS = { 't:ta': 3, 't:tb': 4, 'a:flow-b': 3, all: 5 };
      const RUNS = 24;
      const CHAOS_MS = 25_000;
      const harness = (h = await createHarness('flowwakekill', {
        AGENTS_MODULE,
        FLOW_CONTROL: 'true',
        FLOW_TENANT_CONCURRENCY: '3',
        FLOW_TENANT_LIMITS: JSON.stringify({ tb: 4 }),
        FLOW_AGENT_LIMITS: JSON.stringify({ 'flow-b': 3 }),
        FLOW_FLEET_CONCURRENCY: '5',
        FLOW_SWEEP_MS: '200',
        STUCK_RUN_MIN_AGE_MS: '500',
        RECONCILER_SWEEP_MS: '300',
      }));
      const { ctx } = harness;
      reconciler = new Reconciler(ctx, 'reconciler:flowwakekill');
      reconciler.start();
      let starting = 0;
      const addWorker = async () => {
        starting++;
        try {
          const w = await spawnWorker(harness.env, { startTimeoutMs: 60_000 });
          workers.add(w);
          void w.exited.then(() => workers.delete(w));
        } finally {
          starting--;
        }
      };
      await Promise.all([addWorker(), addWorker(), addWorker()]);
      const sampler = sampleAtWork(ctx, { tenants: ['ta', 'tb'], agents: ['flow-a', 'flow-b'] }, 50);
      const started = Date.now();
      // Every run sleeps until one of two instants, so the sleeps of many runs end together.
      const instants = [started + 9_000, started + 18_000];
      const runIds: string[] = [];
      for (let i = 0; i < RUNS; i++) {
        const script = [
          turn('work', { ms: 100 }),
          turn('wait_for', { key: `k${i}`, timeoutSeconds: 300 }),
          turn('work', { ms: 200 }),
          turn('sleep_until', { untilMs: instants[i % 2]! }),
          turn('work', { ms: 200 }),
          { toolCalls: [], final: 'done', usage, transientFailures },
        ];
        const tenant = i % 2 === 0 ? 'ta' : 'tb';
        const agent = i % 4 < 2 ? 'flow-a' : 'flow-b';
        const req = { tenant, agent, input: { id: `K-${i}` }, model: 'scripted', script };
        runIds.push((await startRun(ctx, req, `kill-${i}`)).runId);
      }
      // The producers: every event of the runs waiting for one, delivered together, every 1.5 s.
      const delivered = new Set<number>();
      let done = false;
      const producers = (async () => {
        while (!done) {
          const statuses = await Promise.all(runIds.map((r) => statusOf(harness, r)));
          const batch = runIds.map((_, i) => i).filter((i) => statuses[i] === 'waiting_event' && !delivered.has(i));
          await Promise.all(
            batch.map(async (i) => {
              const tenant = i % 2 === 0 ? 'ta' : 'tb';
              const r = await deliver(ctx, {
                tenant,
                agent: i % 4 < 2 ? 'flow-a' : 'flow-b',
                key: `k${i}`,
                payload: { i },
              });
              if (r.kind === 'resumed') delivered.add(i);
            }),
          );
          await new Promise((r) => setTimeout(r, 1500)); // the deliveries' schedule: a batch every 1.5 s
        }
      })();
      let kills = 0;
      // At least CHAOS_MS, and on until 6 kills (a loaded machine boots replacements slowly), 45 s at most.
      while ((Date.now() < started + CHAOS_MS || kills < 6) && Date.now() < started + 45_000) {
        await new Promise((r) => setTimeout(r, 1000 + Math.random() * 1500)); // the kill loop's pace
        // One worker is left standing at least (replacements boot in the background, seconds on a loaded machine).
        const victim = workers.size >= 2 ? [...workers][Math.floor(Math.random() * workers.size)] : undefined;
        if (victim) {
          victim.child.kill('SIGKILL');
          await victim.exited;
          kills++;
        }
        for (let n = workers.size + starting; n < 3; n++) void addWorker();
      }
      while (workers.size + starting < 3) void addWorker();
      const statuses = await until(
        'every run ended',
        80_000,
        async () => {
          const s = await Promise.all(runIds.map((r) => statusOf(harness, r)));
          return s.every((x) => ENDED.includes(x)) && s;
        },
        200,
      );
      done = true;
      await producers;
      const seen = await sampler.stop();
      console.info(
        `flow wake kill loop: ${RUNS} runs, ${kills} worker SIGKILLs, ${seen.samples} samples, ` +
          `most at work (counters) ${JSON.stringify(seen.counters)}, (running) ${JSON.stringify(seen.running)}, ` +
          `${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      expect(kills).toBeGreaterThanOrEqual(5);
      expect(statuses).toEqual(runIds.map(() => 'completed'));
      for (const [field, limit] of Object.entries(LIMITS)) {
        expect({ field, counter: seen.counters[field] ?? 0 }).toEqual({
          field,
          counter: Math.min(seen.counters[field] ?? 0, limit),
        });
        expect({ field, running: seen.running[field] ?? 0 }).toEqual({
          field,
          running: Math.min(seen.running[field] ?? 0, limit),
        });
      }
      // The limits were reached, not merely respected by an idle fleet.
      expect(seen.counters.all).toBe(LIMITS.all);
      for (let i = 0; i < RUNS; i++) {
        const obs = (await ctx.store.transcript(runIds[i]!)).filter(
          (e): e is ObservationEntry => e.kind === 'observation',
        );
        expect(obs.filter((o) => o.tool === 'wait_for').map((o) => o.output)).toEqual([{ event: { i } }]);
      }
      await until('every slot back', 10_000, async () => {
        const counts = await ctx.redis.hgetall(ctx.keys.flow().counts);
        return Object.values(counts).every((v) => Number(v) === 0);
      });
    },
  );
});
