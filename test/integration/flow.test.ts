/**
 * Flow control on real Redis: runs wait in their tenant's line and are admitted under the
 * concurrency limits, in weighted turns, higher priority first; a slot comes back when the run
 * ends (or by the bookkeeping sweep when the release was lost); an admission whose admitter died
 * before releasing the job is finished by the sweep; a run is never admitted twice; limits and
 * weights change at run time, recorded with who changed them; a waiting run is cancelled at once; a run
 * admitted by another process between its enqueue and its creation is promoted by its creator, or by the
 * admitter when the creation lands while it checks.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec, startRun } from '../../src/producer/intake.js';
import { flowAdmit } from '../../src/store/calls/flowAdmit.js';
import { flowEnqueue } from '../../src/store/calls/flowEnqueue.js';
import { flowRelease } from '../../src/store/calls/flowRelease.js';
import { INTAKE_GRACE_MS, placeInLine } from '../../src/flow/admission.js';
import { readFlowView } from '../../src/flow/view.js';
import { stepJobId } from '../../src/store/keys.js';
import { STEP_JOB_NAME } from '../../src/store/queues.js';
import { cancelRun } from '../../src/operations/cancel.js';
import { wakeForCancel } from '../../src/runs/stop.js';
import { until } from '../../testkit/until.js';
import { admitArgs } from '../support/admitArgs.js';

let h: Harness;
const ticket = (i: number) => ({ ...sampleTicket(`T-${i}`), subject: `order ${i}` });
let n = 0;
const start = (tenant: string, extra: Record<string, unknown> = {}) =>
  startRun(h.ctx, { tenant, ticket: ticket(++n), ...extra }, `k-${n}`);
const flow = () => h.ctx.keys.flow();
/** Step 1's job: `queued` once released to the queue (BullMQ's prioritized set, src/flow/stepPriority.ts, or its wait list). */
const jobState = async (runId: string) => {
  const state = await h.ctx.queues.forRun(runId).getJobState(stepJobId(runId, 1));
  return state === 'prioritized' || state === 'waiting' ? 'queued' : state;
};
/** Takes every run of the script tests out of flow control (they have no run hash to end them). */
async function clear(): Promise<void> {
  for (const key of [flow().waiting, flow().held]) {
    for (const runId of await h.ctx.redis.hkeys(key)) await flowRelease(h.ctx.redis, flow(), runId);
  }
}
const heldOf = async (tenant: string) => Number((await h.ctx.redis.hget(flow().counts, `t:${tenant}`)) ?? 0);
/**
 * Runs without a run hash in the lines of `tenants` for the script tests: round i puts `runId(tenant, i)` in each
 * tenant's line in turn, placed by i at priority 0.
 */
async function enqueue(tenants: string[], rounds: number, runId: (tenant: string, i: number) => string): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    for (const tenant of tenants) {
      await flowEnqueue(
        h.ctx.redis,
        flow(),
        h.ctx.keys.flowLine(tenant),
        runId(tenant, i),
        { tenant, agent: 'support', shard: 0, priority: 0, at: i },
        placeInLine(0, i),
      );
    }
  }
}

beforeAll(async () => {
  h = await createHarness('flow', { FLOW_CONTROL: 'true', FLOW_TENANT_CONCURRENCY: '2', FLOW_SWEEP_MS: '100000' });
});
afterAll(async () => {
  await h.close();
});

describe('the admission script', () => {
  it('serves the tenants in weighted turns (weight 2 gets two turns to one)', async () => {
    const k = flow();
    await enqueue(['wa', 'wb'], 10, (tenant, i) => `r_w${tenant}${i}`);
    const admitted = await flowAdmit(h.ctx.redis, k, admitArgs({ max: 6, configured: { 'w:wa': 2 } }));
    expect(admitted.map((a) => a.tenant)).toEqual(['wa', 'wb', 'wa', 'wa', 'wb', 'wa']);
    expect(admitted.filter((a) => a.tenant === 'wa').map((a) => a.runId)).toEqual([
      'r_wwa0',
      'r_wwa1',
      'r_wwa2',
      'r_wwa3',
    ]);
    await clear();
  });

  it('turns stay exact: passes a tiny weight pushed to 1e300 are repaired once the weight is reset', async () => {
    const k = flow();
    // What a weight of 1e-300 leaves behind (1 / weight per turn): every tenant's pass near 1e300, where adding a
    // turn's stride changes nothing in floating point and the turns fall back to alphabetical order.
    await h.ctx.redis.hset(k.passes, 'ta', '1e300', 'tg', '1e300', '~vtime', '1e300');
    await enqueue(['ta', 'tg'], 6, (tenant, i) => `r_x${tenant}${i}`);
    const admitted = await flowAdmit(h.ctx.redis, k, admitArgs({ max: 12 }));
    const order = admitted.map((a) => (a.tenant === 'ta' ? 'A' : 'G')).join('');
    expect(order).toHaveLength(12);
    // Equal weights take turns: never three of one tenant in a row, half each in the first six.
    expect(order).not.toMatch(/AAA|GGG/);
    expect(
      order
        .slice(0, 6)
        .split('')
        .filter((c) => c === 'A'),
    ).toHaveLength(3);
    // And the passes are back to small integers (exact from here on).
    const passes = await h.ctx.redis.hgetall(k.passes);
    for (const tenant of ['ta', 'tg']) expect(Number.isSafeInteger(Number(passes[tenant]))).toBe(true);
    await clear();
  });

  it('never admits a run twice, however many admit at once', async () => {
    const k = flow();
    await enqueue(['race'], 20, (_tenant, i) => `r_race${i}`);
    const args = admitArgs({ max: 3, tenantLimit: 7 });
    const rounds = await Promise.all(Array.from({ length: 6 }, () => flowAdmit(h.ctx.redis, k, args)));
    const ids = rounds.flat().map((a) => a.runId);
    expect(ids).toHaveLength(7);
    expect(new Set(ids).size).toBe(7);
    expect(await heldOf('race')).toBe(7);
    await clear();
  });
});

describe('admission', () => {
  it('admits up to the tenant limit; the others wait with their step job delayed', async () => {
    const runs = [];
    for (let i = 0; i < 5; i++) runs.push((await start('lim')).runId);
    expect(await heldOf('lim')).toBe(2);
    const states = await Promise.all(runs.map(jobState));
    expect(states.filter((s) => s === 'queued')).toHaveLength(2);
    expect(states.filter((s) => s === 'delayed')).toHaveLength(3);
    expect(await h.ctx.redis.zcard(h.ctx.keys.flowLine('lim'))).toBe(3);
  });

  it('gives the slot back when a run ends and admits the next, the higher priority first', async () => {
    const first = (await start('prio')).runId;
    const second = (await start('prio')).runId;
    const normal = (await start('prio')).runId;
    const urgent = (await start('prio', { priority: 4 })).runId;
    expect(await jobState(normal)).toBe('delayed');
    expect(await jobState(urgent)).toBe('delayed');
    await h.ctx.admission!.release(first);
    expect(await jobState(urgent)).toBe('queued');
    expect(await jobState(normal)).toBe('delayed');
    await h.ctx.admission!.release(second);
    expect(await jobState(normal)).toBe('queued');
    // A release sent twice frees one slot once.
    await h.ctx.admission!.release(second);
    expect(await heldOf('prio')).toBe(2);
  });
});

describe('crash points', () => {
  it('an admission whose admitter died before releasing the job is finished by the sweep', async () => {
    const a = h.ctx.admission!;
    await h.ctx.redis.hset(flow().settings, 't:dead', '1');
    const runId = (await start('dead')).runId;
    // Admitted already (a free slot): put it back as an admission a dead connection made.
    expect(await jobState(runId)).toBe('queued');
    const other = (await start('dead')).runId;
    expect(await jobState(other)).toBe('delayed');
    await h.ctx.redis.hset(flow().settings, 't:dead', '2');
    const k = flow();
    const [admitted] = await flowAdmit(h.ctx.redis, k, admitArgs({ max: 1, owner: '999999999', tenantLimit: 2 }));
    expect(admitted?.runId).toBe(other);
    expect(await jobState(other)).toBe('delayed');
    expect(await h.ctx.redis.hget(k.pending, other)).toBe('999999999');
    const swept = await a.sweep();
    expect(swept.promoted).toBeGreaterThanOrEqual(1);
    expect(await jobState(other)).toBe('queued');
    expect(await h.ctx.redis.hexists(k.pending, other)).toBe(0);
  });

  it('a slot whose release was lost (the run ended, its worker died) is released by the sweep', async () => {
    await h.ctx.admission!.configure('limit', 'lost', 1, 'test');
    const ended = (await start('lost')).runId;
    const next = (await start('lost')).runId;
    expect(await jobState(next)).toBe('delayed');
    // The run's commit ended it, and the process died before the release.
    await h.ctx.redis.hset(h.ctx.keys.run(ended).run, 'status', 'completed');
    const swept = await h.ctx.admission!.sweep();
    expect(swept.released).toBeGreaterThanOrEqual(1);
    expect(await jobState(next)).toBe('queued');
    expect(await heldOf('lost')).toBe(1);
  });
});

describe('a follow-up at a higher priority', () => {
  it('is placed behind its subject’s previous run still waiting, which is admitted first', async () => {
    await h.ctx.admission!.configure('limit', 'fup', 1, 'test');
    const busy = (await start('fup')).runId;
    const subject = ticket(++n);
    const at = Date.now();
    const previous = await startRun(h.ctx, { tenant: 'fup', ticket: subject }, undefined, at, 'e-1');
    // A millisecond later at least: two runs of one subject created in the same millisecond are not ordered
    // (src/producer/intake.ts), and on a fast machine the second create can land in the first one's millisecond.
    const followUp = await startRun(
      h.ctx,
      { tenant: 'fup', ticket: { ...subject, body: 'Any news?' }, priority: 4 },
      undefined,
      Math.max(Date.now(), at + 1),
      'e-2',
    );
    expect(followUp.previousRunId).toBe(previous.runId);
    const other = (await start('fup', { priority: 4 })).runId;
    expect(await h.ctx.redis.zrange(h.ctx.keys.flowLine('fup'), 0, -1)).toEqual([
      other,
      previous.runId,
      followUp.runId,
    ]);
    await h.ctx.admission!.release(busy);
    expect(await jobState(other)).toBe('queued');
    await h.ctx.admission!.release(other);
    expect(await jobState(previous.runId)).toBe('queued');
    expect(await jobState(followUp.runId)).toBe('delayed');
  });
});

describe('the requests of a create', () => {
  it("the run and its deferred job are one script, the creator's pending check rides on the admission", async () => {
    // What the intake's connection sends for one create under flow control, by command name.
    const sent: string[] = [];
    const redis = h.ctx.redis as unknown as { sendCommand(cmd: { name: string }, ...rest: unknown[]): unknown };
    const original = redis.sendCommand;
    redis.sendCommand = function (this: unknown, cmd: { name: string }, ...rest: unknown[]) {
      sent.push(cmd.name.toLowerCase());
      return original.call(this, cmd, ...rest);
    };
    let runId: string;
    try {
      // A first create makes the connection's one-time requests (its owner name, BullMQ's checks): not counted.
      await start('requests');
      sent.length = 0;
      const r = await start('requests');
      expect(r.created).toBe(true);
      runId = r.runId;
    } finally {
      redis.sendCommand = original;
    }
    expect(await jobState(runId)).toBe('queued');
    // The Idempotency-Key's record, the line (flowEnqueue), the run with its job deferred (createRun), the admission
    // (flowAdmit); then the job's release (BullMQ's scripts) and the pending mark's removal.
    const intake = sent.filter((c) =>
      ['set', 'evalsha', 'eval', 'multi', 'exec', 'hexists', 'hget', 'hdel'].includes(c),
    );
    expect(intake.slice(0, 4)).toEqual(['set', 'evalsha', 'evalsha', 'evalsha']);
    expect(intake.at(-1)).toBe('hdel');
    for (const twoRequests of ['multi', 'exec', 'hexists']) expect(sent).not.toContain(twoRequests);
  });
});

describe('an admission between enqueue and intake', () => {
  /** A run's spec, put in line but not created yet: the state a creator is in between its two steps. */
  async function inLineNotCreated(tenant: string, at = Date.now()) {
    const spec = buildSpec(h.ctx, { tenant, ticket: ticket(++n) }, at, `k-${n}`);
    await h.ctx.admission!.enqueue({ runId: spec.runId, tenant, agent: spec.agent, priority: 0 }, at);
    return spec;
  }

  /**
   * Runs `after[i]` right after the i-th read of the run's job state (an admitter checking why its promotion failed),
   * before the reader acts on what it read; past the last, reads are as usual again.
   */
  function afterStateReads(runId: string, after: ((jobId: string) => Promise<void>)[]) {
    const queue = h.ctx.queues.forRun(runId);
    const read = queue.getJobState.bind(queue);
    let reads = 0;
    queue.getJobState = async (jobId: string) => {
      const state = await read(jobId);
      const hook = after[reads++]!;
      if (reads === after.length) queue.getJobState = read;
      await hook(jobId);
      return state;
    };
    return { reads: () => reads, restored: () => queue.getJobState === read };
  }
  const intakeOf = (spec: ReturnType<typeof buildSpec>) => async () => {
    expect((await h.ctx.store.intake(spec, Date.now(), true)).outcome).toBe('created');
  };

  it('another process admits the run before it exists: it stays held, and its creator promotes it', async () => {
    const a = h.ctx.admission!;
    await a.configure('limit', 'between', 1, 'test');
    const first = (await start('between')).runId;
    const spec = await inLineNotCreated('between');
    // A slot frees in another process: the run is admitted, its job does not exist yet.
    await a.release(first);
    expect(await h.ctx.redis.hexists(flow().held, spec.runId)).toBe(1);
    expect(await h.ctx.redis.hexists(flow().pending, spec.runId)).toBe(1);
    // The sweep leaves a held run that may still be on its way alone.
    await a.sweep();
    expect(await h.ctx.redis.hexists(flow().held, spec.runId)).toBe(1);
    // The creator's intake, then its check: the job leaves the delayed set.
    expect((await h.ctx.store.intake(spec, Date.now(), true)).outcome).toBe('created');
    expect(await jobState(spec.runId)).toBe('delayed');
    await a.created(spec.runId);
    expect(await jobState(spec.runId)).toBe('queued');
    expect(await h.ctx.redis.hexists(flow().pending, spec.runId)).toBe(0);
    expect(await heldOf('between')).toBe(1);
  });

  it('the run is created while the admitter checks why its promotion failed: the admitter promotes it', async () => {
    const a = h.ctx.admission!;
    await a.configure('limit', 'race', 1, 'test');
    const first = (await start('race')).runId;
    const spec = await inLineNotCreated('race');
    // The creator's intake lands just after the admitter read the job's state ('unknown'), before it checks the run.
    const reads = afterStateReads(spec.runId, [intakeOf(spec)]);
    await a.release(first);
    expect(reads.restored()).toBe(true);
    // Not left delayed until its deadline with no pending mark for its creator's check to find.
    expect(await jobState(spec.runId)).toBe('queued');
    expect(await h.ctx.redis.hexists(flow().pending, spec.runId)).toBe(0);
    await a.created(spec.runId);
    expect(await heldOf('race')).toBe(1);
  });

  it("another process promotes the job between the admitter's check and its promotion: released once, no error", async () => {
    const a = h.ctx.admission!;
    await a.configure('limit', 'race2', 1, 'test');
    const first = (await start('race2')).runId;
    const spec = await inLineNotCreated('race2');
    // The admitter's first promotion finds no job; the creator's intake lands as it reads the state ('unknown'); as
    // it reads the state again ('delayed'), another process (the repair sweep, another admission) promotes the job.
    const queue = h.ctx.queues.forRun(spec.runId);
    const reads = afterStateReads(spec.runId, [
      intakeOf(spec),
      async (jobId) => void (await (await queue.getJob(jobId))!.promote()),
    ]);
    // Failed with BullMQ's 'is not in the delayed state' (the API answered 500 on the create that freed the slot).
    await a.release(first);
    expect(reads.reads()).toBe(2);
    expect(reads.restored()).toBe(true);
    expect(await jobState(spec.runId)).toBe('queued');
    expect(await h.ctx.redis.hexists(flow().pending, spec.runId)).toBe(0);
    expect(await heldOf('race2')).toBe(1);
  });

  it('a run whose creator died after enqueue gives its slot back once INTAKE_GRACE_MS has passed', async () => {
    const a = h.ctx.admission!;
    await a.configure('limit', 'orphan', 1, 'test');
    const spec = await inLineNotCreated('orphan', Date.now() - INTAKE_GRACE_MS - 1000);
    await a.admit();
    expect(await h.ctx.redis.hexists(flow().held, spec.runId)).toBe(0);
    expect(await heldOf('orphan')).toBe(0);
    const next = (await start('orphan')).runId;
    expect(await jobState(next)).toBe('queued');
  });
});

describe('run time changes and cancel', () => {
  it('a raised limit admits at once; the change is recorded with who made it', async () => {
    await h.ctx.admission!.configure('limit', 'grow', 1, 'ops-ada');
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push((await start('grow')).runId);
    expect(await heldOf('grow')).toBe(1);
    await h.ctx.admission!.configure('limit', 'grow', 3, 'ops-bob');
    expect(await heldOf('grow')).toBe(3);
    const view = await readFlowView(h.ctx.redis, h.ctx.keys, h.cfg, Date.now());
    const line = view.tenants.find((t) => t.tenant === 'grow')!;
    expect(line).toMatchObject({ held: 3, waiting: 1, limit: 3 });
    expect(view.changes[0]).toMatchObject({ who: 'ops-bob', what: 'limit', of: 'grow', from: '1', to: '3' });
    await expect(h.ctx.admission!.configure('weight', 'grow', 0, 'ops-bob')).rejects.toThrow(/weight/);
  });

  it('a run cancelled while it waits in line ends at once and leaves the line', async () => {
    await h.ctx.admission!.configure('limit', 'cxl', 1, 'test');
    await start('cxl');
    const waiting = (await start('cxl')).runId;
    const outcome = await cancelRun(h.ctx, { name: 'ops-ada', tenants: '*' }, waiting);
    expect(outcome.kind).toBe('done');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(waiting).run, 'status')).toBe('cancelled');
    expect(await h.ctx.redis.zcard(h.ctx.keys.flowLine('cxl'))).toBe(0);
    expect(await jobState(waiting)).toBe('unknown');
  });
});

describe('a promotion that meets a store error', () => {
  /** The run's queue hands out its jobs with a promotion that fails as a dropped connection does; returns the undo. */
  function failingPromotions(runId: string): () => void {
    const queue = h.ctx.queues.forRun(runId);
    const get = queue.getJob.bind(queue);
    queue.getJob = async (jobId: string) => {
      const job = await get(jobId);
      if (job) job.promote = () => Promise.reject(new Error('Connection is closed.'));
      return job;
    };
    return () => {
      queue.getJob = get;
    };
  }

  it("a woken run's release names it and leaves the job to the repair sweep", async () => {
    const a = h.ctx.admission!;
    await a.configure('limit', 'pse', 1, 'test');
    const { runId } = await start('pse');
    const agent = (await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'agent'))!;
    // The run parks and wakes: its wake job, delayed, takes the slot it still holds.
    const jobId = stepJobId(runId, 2);
    await h.ctx.queues.forRun(runId).add(STEP_JOB_NAME, { v: 1, runId, step: 2 }, { jobId, delay: 60_000 });
    expect(await a.wake({ runId, tenant: 'pse', agent, jobId }, Date.now())).toBe('held');
    const warn = vi.spyOn(h.ctx.log, 'warn');
    const undo = failingPromotions(runId);
    let codes: unknown[];
    try {
      // Swallowed as "released already" before: nothing said, the job delayed until the sweep.
      await a.wokenWaits({ runId, jobId });
      codes = warn.mock.calls.map(([fields]) => (fields as { code?: string }).code);
    } finally {
      undo();
      warn.mockRestore();
    }
    expect(codes).toContain('flow_wake_release_failed');
    // Left delayed, held: the repair pass releases such a job (src/flow/repair.ts, job_released) as here.
    expect(await h.ctx.queues.forRun(runId).getJobState(jobId)).toBe('delayed');
    expect(await a.releaseHeld(runId)).toBe(true);
    expect(await h.ctx.queues.forRun(runId).getJobState(jobId)).not.toBe('delayed');
  });

  it("a cancel's wake of a delayed step job fails with it; a job that left the delayed set first answers false", async () => {
    await h.ctx.admission!.configure('limit', 'psc', 1, 'test');
    await start('psc');
    // Waiting in line: its step 1 job is delayed.
    const { runId } = await start('psc');
    expect(await jobState(runId)).toBe('delayed');
    const undo = failingPromotions(runId);
    try {
      // Answered false before, as if another process had promoted the job: the cancel looked done.
      await expect(wakeForCancel(h.ctx, runId)).rejects.toThrow(/Connection is closed/);
    } finally {
      undo();
    }
    await (await h.ctx.queues.forRun(runId).getJob(stepJobId(runId, 1)))!.promote();
    expect(await wakeForCancel(h.ctx, runId)).toBe(false);
  });
});

describe('with a worker', () => {
  it('every run finishes and a tenant never has more than its limit at work', async () => {
    const w = await h.startWorker();
    const runs = [];
    for (let i = 0; i < 8; i++) runs.push((await start('busy')).runId);
    let most = 0;
    const sampler = setInterval(() => {
      void heldOf('busy').then((v) => {
        most = Math.max(most, v);
      });
    }, 5);
    for (const r of runs) await h.waitForStatus(r, ['completed', 'failed', 'needs_human', 'budget_exceeded'], 60_000);
    clearInterval(sampler);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2);
    // The last release follows its run's final commit.
    await until("busy's slots given back", 5000, async () => (await heldOf('busy')) === 0);
    await w.stop();
  });
});
