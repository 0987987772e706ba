/**
 * Step-level fairness on real Redis (src/flow/stepPriority.ts): under flow control a tenant with few
 * runs at work has its step jobs taken before the step jobs another tenant with many runs at work
 * queued earlier, from its first step (given its priority by the admission) to its last; flow
 * control off keeps the one first-come-first-served line. Steps are driven one at a time (fetch, the engine's
 * processor, completion), so the order asserted is the queue's, not a race between workers.
 * FLOW_STEP_PRIORITY=false keeps flow control's admission with the one line. A heavy tenant working alone still has
 * its step jobs prioritized: on the wait list (served first, in arrival order) they would stay ahead of a tenant that
 * arrives after them, which the levels put first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker, type Job } from 'bullmq';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startRun } from '../../src/producer/intake.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { stepPriority } from '../../src/flow/stepPriority.js';
import { final, read } from '../../testkit/turns.js';

const script = (steps: number): Script => [...Array.from({ length: steps - 1 }, () => read), final];

const HEAVY_RUNS = 8;
const STEPS = 4;

/** Runs started in this file: each its own subject and idempotency key. */
let started = 0;

/** Starts runs of STEPS steps for a tenant, remembering each run's tenant. */
function runStarter(h: Harness) {
  const tenantOf = new Map<string, string>();
  const start = async (tenant: string) => {
    const n = ++started;
    const r = await startRun(
      h.ctx,
      {
        tenant,
        ticket: { ...sampleTicket(`T-${tenant}-${n}`), subject: `order ${n}` },
        budget: { maxSteps: STEPS + 2 },
        agent: { model: 'scripted', script: script(STEPS) },
      },
      `k-${tenant}-${n}`,
    );
    tenantOf.set(r.runId, tenant);
  };
  return { tenantOf, start };
}

/**
 * Takes step jobs one at a time (fetch, the engine's processor, completion), `limit` of them or until none is left,
 * and returns the tenant of each in the order the queue gave them. `close` ends the driver.
 */
async function stepDriver(h: Harness, tenantOf: Map<string, string>) {
  const fleet = new FleetWorker(h.ctx, { effects: createEffectRunner(h.ctx) }); // never started: driven below
  const manual = new Worker(h.ctx.keys.queueName(0), null, {
    connection: h.ctx.redis,
    prefix: h.ctx.keys.bullPrefix,
    lockDuration: 60_000,
  });
  await manual.waitUntilReady();
  const signal = new AbortController().signal;
  let taken = 0;
  /** Fetches up to `count` jobs first, then processes them: as many slots taking jobs at once. */
  const takeTogether = async (count: number): Promise<string[]> => {
    const jobs: [Job, string][] = [];
    for (let i = 0; i < count; i++) {
      const token = `order-${taken++}`;
      const job = (await manual.getNextJob(token, { block: false })) as Job | undefined;
      if (!job) break;
      jobs.push([job, token]);
    }
    for (const [job, token] of jobs) {
      await fleet.processor.process(job, token, signal);
      await job.moveToCompleted(undefined, token, false);
    }
    return jobs.map(([job]) => tenantOf.get((job.data as { runId: string }).runId) ?? '?');
  };
  return {
    takeTogether,
    async take(limit = Infinity): Promise<string[]> {
      const order: string[] = [];
      while (order.length < limit) {
        const one = await takeTogether(1);
        if (one.length === 0) break;
        order.push(...one);
      }
      return order;
    },
    async close() {
      await manual.close();
      await fleet.stop(true);
    },
  };
}

async function expectAllCompleted(h: Harness, tenantOf: Map<string, string>) {
  const ended = await Promise.all(
    [...tenantOf.keys()].map((runId) => h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')),
  );
  expect(ended.every((s) => s === 'completed')).toBe(true);
}

/**
 * Tenant `heavy` starts HEAVY_RUNS runs, then tenant `light` one, all admitted at once (no limit); then steps are
 * taken one at a time. Returns the tenant of each step job in the order the queue gave them.
 */
async function stepOrder(h: Harness): Promise<string[]> {
  const { tenantOf, start } = runStarter(h);
  for (let i = 0; i < HEAVY_RUNS; i++) await start('heavy');
  await start('light');
  // What every worker's bookkeeping sweep does each FLOW_SWEEP_MS: the tenants' shares read again.
  await h.ctx.admission?.refreshStepPriorities();
  const driver = await stepDriver(h, tenantOf);
  try {
    const order = await driver.take();
    await expectAllCompleted(h, tenantOf);
    return order;
  } finally {
    await driver.close();
  }
}

describe('step jobs under flow control', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('flow-steps', {
      FLOW_CONTROL: 'true',
      FLOW_TENANT_CONCURRENCY: '0',
      FLOW_SWEEP_MS: '100000',
    });
  });
  afterAll(async () => {
    await h.close();
  });

  it("a tenant with one run at work has its steps taken before the other tenant's backlog", async () => {
    const order = await stepOrder(h);
    expect(order).toHaveLength((HEAVY_RUNS + 1) * STEPS);
    // Light's run, admitted after heavy's eight, is done before heavy's runs have all taken their first step:
    // heavy's first run (admitted alone, the same share as light) goes first, then light's steps one after another.
    expect(order.slice(0, STEPS + 1)).toEqual(['heavy', ...Array(STEPS).fill('light')]);
  });

  it("a tenant arriving while a heavier one works alone goes before the heavy tenant's queued steps", async () => {
    const { tenantOf, start } = runStarter(h);
    for (let i = 0; i < HEAVY_RUNS; i++) await start('heavy');
    await h.ctx.admission?.refreshStepPriorities(); // heavy alone at work, as a sweep reads it
    const driver = await stepDriver(h, tenantOf);
    try {
      // Every heavy run takes a step at once, so each queues its next one while heavy works alone.
      expect(await driver.takeTogether(HEAVY_RUNS)).toEqual(Array(HEAVY_RUNS).fill('heavy'));
      await start('light');
      // Light's run goes through before any of the heavy runs' queued steps: none of them may sit on the wait list,
      // which BullMQ serves first and in arrival order, ahead of it.
      expect((await driver.take()).slice(0, STEPS)).toEqual(Array(STEPS).fill('light'));
      await expectAllCompleted(h, tenantOf);
    } finally {
      await driver.close();
    }
  });
});

describe.each([
  ['without flow control', { FLOW_CONTROL: 'false' }],
  ['under flow control with FLOW_STEP_PRIORITY=false', { FLOW_CONTROL: 'true', FLOW_STEP_PRIORITY: 'false' }],
])('step jobs %s', (_name, env) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('flow-steps-fifo', { ...env, FLOW_TENANT_CONCURRENCY: '0', FLOW_SWEEP_MS: '100000' });
  });
  afterAll(async () => {
    await h.close();
  });

  it('stay in one first-come-first-served line', async () => {
    const order = await stepOrder(h);
    // Light's first step waits for heavy's eight, its second for heavy's eight step-2 jobs, and so on: it ends last.
    expect(order.slice(0, 2 * HEAVY_RUNS + 2)).toEqual([
      ...Array(HEAVY_RUNS).fill('heavy'),
      'light',
      ...Array(HEAVY_RUNS).fill('heavy'),
      'light',
    ]);
    expect(order.lastIndexOf('light')).toBe(order.length - 1);
  });
});

describe('stepPriority', () => {
  it('is 1 below a load of two runs per unit of weight, then one more per doubling', () => {
    expect([0, 1, 1.9, 2, 3, 4, 8, 50, 1000].map((held) => stepPriority(held, 1))).toEqual([
      1, 1, 1, 2, 2, 3, 4, 6, 10,
    ]);
    expect(stepPriority(50, 2)).toBe(5);
    expect(stepPriority(40, 1)).toBe(stepPriority(50, 1));
  });
});
