/**
 * No run is lost silently: every way a step job can die ends its
 * run with a status, a reason code, a status journal entry, a run event and
 * agent_runs_finished_total{status,reason}; the reconciler's sweep finds runs whose current
 * job is missing; the run view answers 200 for a run whose stored data no longer parses.
 * Real Redis, real BullMQ workers, real worker processes killed with SIGKILL, real HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UnrecoverableError, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createHarness, producerAuth, redisUrl, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { stepJobId } from '../../src/store/keys.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { final, read } from '../../testkit/turns.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { until } from '../../testkit/until.js';
import { scriptedRun } from '../support/crashVictim.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const newRun = (harness: Harness, ticketId: string, script: Script = [read, final] as Script) =>
  scriptedRun(harness, ticketId, script);

/** The BullMQ hash of a run's step job (BullMQ's key layout). */
function jobKey(harness: Harness, runId: string, jobId: string): string {
  return `${harness.cfg.BULL_PREFIX}:${harness.ctx.keys.queueName(harness.ctx.keys.shardOf(runId))}:${jobId}`;
}

async function runHash(harness: Harness, runId: string): Promise<Record<string, string>> {
  return harness.ctx.redis.hgetall(harness.ctx.keys.run(runId).run);
}

async function lastStatusEntry(
  harness: Harness,
  runId: string,
): Promise<{ kind: string; status: string; reason: string } | undefined> {
  // Through the store: an ended run's journal is packed (src/runs/compact.ts).
  return (await harness.ctx.store.journalEntry(runId, -1)) as
    { kind: string; status: string; reason: string } | undefined;
}

async function statusEvents(harness: Harness, runId: string): Promise<{ status: string; reason: string }[]> {
  return (await readRunEvents(harness.ctx, runId))
    .filter((e) => e.type === 'status_changed')
    .map((e) => JSON.parse(e.data) as { status: string; reason: string });
}

async function finishedCount(harness: Harness, status: string, reason: string): Promise<number> {
  const text = await harness.ctx.metrics.registry.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`agent_runs_finished_total{status="${status}",reason="${reason}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Waits for a condition, not a time. */
/** The run ended with this status and reason, with a journal entry, an event and the metric. */
async function expectSettled(
  harness: Harness,
  runId: string,
  status: string,
  reason: string,
  metricReason: string,
): Promise<void> {
  expect(await harness.waitForStatus(runId, [status])).toBe(status);
  const run = await runHash(harness, runId);
  expect(run.reason).toBe(reason);
  expect(await lastStatusEntry(harness, runId)).toMatchObject({ kind: 'status', status, reason });
  expect(await statusEvents(harness, runId)).toContainEqual(expect.objectContaining({ status, reason }));
  await until('the run-finished metric', 5000, async () => (await finishedCount(harness, status, metricReason)) === 1);
}

describe('a step job that dies ends its run', () => {
  it('job data that no longer parses: failed, invalid_job_data naming the field, at once', async () => {
    h = await createHarness('lostdata');
    const runId = await newRun(h, 'LR-data');
    // Job data the worker cannot parse (a negative total; an absurd provider usage is refused before it gets here).
    await h.ctx.redis.hset(
      jobKey(h, runId, stepJobId(runId, 1)),
      'data',
      `{"v":1,"runId":"${runId}","step":1,"used":{"steps":0,"tokens":-1,"contextBytes":0}}`,
    );
    await h.startWorker();
    await expectSettled(h, runId, 'failed', 'invalid_job_data: used.tokens', 'invalid_job_data');
  });

  it('a stored spec that no longer parses: failed, invalid_spec naming the field; its view still answers 200', async () => {
    h = await createHarness('lostspec');
    const runId = await newRun(h, 'LR-spec');
    const spec = JSON.parse((await runHash(h, runId)).spec!);
    spec.limits.maxWallMs = Number.MAX_SAFE_INTEGER;
    spec.limits.deadlineAt = Number.MAX_SAFE_INTEGER + 1_000_000;
    await h.ctx.redis.hset(h.ctx.keys.run(runId).run, 'spec', JSON.stringify(spec));
    await h.startWorker();
    await expectSettled(h, runId, 'failed', 'invalid_spec: limits.maxWallMs', 'invalid_spec');

    const { url } = await h.startApi();
    const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
    expect(res.status).toBe(200);
    const view = (await res.json()) as { status: string; reason: string; tenant: string; notes: string[] };
    expect(view).toMatchObject({ status: 'failed', reason: 'invalid_spec: limits.maxWallMs', tenant: 'acme' });
    expect(view.notes).toContain('spec_unreadable: limits.maxWallMs');
    // The same ticket posted again answers the settled run and its status, not a run queued forever.
    const again = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...producerAuth },
      body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket('LR-spec') }),
    });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ runId, created: false, status: 'failed' });
  });

  it("an exception before the step's own error handling, on every attempt: failed, attempts_exhausted", async () => {
    h = await createHarness('lostexc');
    const runId = await newRun(h, 'LR-exc');
    // A redelivered step reads its journalled decision first; that entry is corrupt, so every attempt throws there.
    const k = h.ctx.keys.run(runId);
    await h.ctx.redis.rpush(k.journal, '{corrupt');
    await h.ctx.redis.hset(k.run, 'decidedStep', '1', 'decisionIndex', '0');
    const job = jobKey(h, runId, stepJobId(runId, 1));
    const data = JSON.parse((await h.ctx.redis.hget(job, 'data'))!);
    await h.ctx.redis.hset(job, 'data', JSON.stringify({ ...data, resume: true }));
    await h.startWorker();
    await expectSettled(h, runId, 'failed', 'attempts_exhausted: journal_corrupt', 'attempts_exhausted');
    expect((await h.ctx.queues.forRun(runId).getJob(stepJobId(runId, 1)))?.attemptsMade).toBe(5);
  });

  it('stalled more than allowed (two worker processes SIGKILLed mid-step): needs_human, stalled_too_often', async () => {
    h = await createHarness('loststall', {
      LOCK_DURATION_MS: '600',
      STALLED_INTERVAL_MS: '300',
      MAX_STALLED_COUNT: '1',
    });
    const runId = await newRun(h, 'LR-stall');
    // Each of the first two processes takes the step and dies before its commit.
    for (let i = 0; i < 2; i++) {
      const w = await spawnWorker({ ...h.env, CRASH_POINTS: 'before_commit@1' });
      expect((await w.exited).signal).toBe('SIGKILL');
    }
    expect(['queued', 'running']).toContain((await runHash(h, runId)).status);
    // The next worker's stall check finds the job stalled a second time: BullMQ fails it.
    await h.startWorker();
    await expectSettled(h, runId, 'needs_human', 'stalled_too_often', 'stalled_too_often');
  }, 60_000);

  it('the sweep settles a run whose current job is missing, and leaves waiting, parked and young runs alone', async () => {
    h = await createHarness('lostmissing');
    const lost = await newRun(h, 'LR-missing');
    const waiting = await newRun(h, 'LR-waiting');
    const parked = await newRun(h, 'LR-parked');
    // The lost run's job is gone (deleted from Bull Board, lost in a failover...).
    const queue = h.ctx.queues.forRun(lost);
    await queue.remove(stepJobId(lost, 1));
    expect(await h.ctx.redis.exists(jobKey(h, lost, stepJobId(lost, 1)))).toBe(0);
    // A run parked for a person has no job either: legitimately.
    await queue.remove(stepJobId(parked, 1));
    await h.ctx.redis.hset(h.ctx.keys.run(parked).run, 'status', 'waiting_approval');

    const reconciler = new Reconciler(h.ctx, 'reconciler:test');
    // Too young: a run is never settled in the instant it was last updated.
    await reconciler.sweep(Date.now());
    expect((await runHash(h, lost)).status).toBe('queued');

    await reconciler.sweep(Date.now() + 10 * 60_000); // past STUCK_RUN_MIN_AGE_MS
    await expectSettled(h, lost, 'needs_human', 'job_missing', 'job_missing');
    expect((await runHash(h, waiting)).status).toBe('queued');
    expect((await runHash(h, parked)).status).toBe('waiting_approval');
    // The waiting run still runs.
    await h.startWorker();
    expect(await h.waitForStatus(waiting, ['completed', 'failed'])).toBe('completed');
  });

  it("the sweep re-creates a running run's missing step job (the run completes), and hands a job that keeps vanishing to a person", async () => {
    h = await createHarness('lostrecreate');
    const lost = await newRun(h, 'LR-recreate');
    const again = await newRun(h, 'LR-recreate-again');
    const queue = h.ctx.queues.forRun(lost);
    for (const runId of [lost, again]) {
      // The run is at work and its job is gone (a write of its queue lost in a failover, a deletion).
      await h.ctx.redis.hset(h.ctx.keys.run(runId).run, 'status', 'running');
      await h.ctx.queues.forRun(runId).remove(stepJobId(runId, 1));
    }
    await h.ctx.redis.hset(h.ctx.keys.run(again).run, 'jobRecreations', '3');

    await new Reconciler(h.ctx, 'reconciler:test').sweep(Date.now() + 10 * 60_000);
    expect(await queue.getJobState(stepJobId(lost, 1))).toBe('waiting');
    expect((await h.ctx.metrics.stepJobsRecreated.get()).values[0]?.value).toBe(1);
    await expectSettled(h, again, 'needs_human', 'job_missing', 'job_missing');
    await h.startWorker();
    expect(await h.waitForStatus(lost, ['completed', 'failed', 'needs_human'])).toBe('completed');
  });

  it('the sweep settles runs whose job failed or completed with no fleet worker to see it (reason codes, no error text)', async () => {
    h = await createHarness('lostnohandler');
    const failed = await newRun(h, 'LR-nohandler-failed');
    const completed = await newRun(h, 'LR-nohandler-completed');
    // A bare BullMQ worker (no fleet handler: as if the fleet worker died before its failed event ran).
    const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const finishedIds = new Set<string>();
    const bare = new Worker(
      h.ctx.keys.queueName(h.ctx.keys.shardOf(failed)),
      async (job) => {
        if (job.id === stepJobId(failed, 1)) throw new UnrecoverableError('Ada Lovelace <ada@example.com> said no');
        return 'done without a commit';
      },
      { connection: connection, prefix: h.cfg.BULL_PREFIX },
    );
    bare.on('failed', (job) => finishedIds.add(job!.id!));
    bare.on('completed', (job) => finishedIds.add(job.id!));
    try {
      await until('both jobs finished', 30_000, async () => finishedIds.size === 2);
    } finally {
      await bare.close();
      connection.disconnect();
    }
    await new Reconciler(h.ctx, 'reconciler:test').sweep(Date.now() + 10 * 60_000);
    await expectSettled(h, failed, 'failed', 'attempts_exhausted: job_failed', 'attempts_exhausted');
    await expectSettled(h, completed, 'needs_human', 'job_completed_without_commit', 'job_completed_without_commit');
  });

  it('a run that completes counts once in agent_runs_finished_total', async () => {
    h = await createHarness('lostcount');
    const runId = await newRun(h, 'LR-count');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    await until(
      'the run-finished metric',
      5000,
      async () => (await finishedCount(h!, 'completed', 'final_answer')) === 1,
    );
  });
});

describe('the run view', () => {
  it('answers 200 for a run whose journal, spec and limits no longer parse', async () => {
    h = await createHarness('lostview');
    const runId = await newRun(h, 'LR-view');
    const k = h.ctx.keys.run(runId);
    await h.ctx.redis.hset(k.run, 'spec', '{not json', 'status', 'failed', 'reason', 'invalid_spec: json');
    await h.ctx.redis.hset(k.budget, 'deadlineAt', String(Number.MAX_SAFE_INTEGER));
    await h.ctx.redis.rpush(
      k.journal,
      '{"v":1,"kind":"decision"}',
      JSON.stringify({ v: 1, kind: 'status', step: 1, status: 'failed', reason: 'invalid_spec: json' }),
    );
    const { url } = await h.startApi();
    const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
    expect(res.status).toBe(200);
    const view = (await res.json()) as {
      status: string;
      tenant: string;
      transcript: unknown[];
      notes: string[];
      budget: { limits: { maxSteps: number } };
    };
    expect(view).toMatchObject({ status: 'failed', tenant: 'acme', budget: { limits: { maxSteps: 10 } } });
    expect(view.transcript).toHaveLength(1);
    expect(view.notes).toEqual(
      expect.arrayContaining(['spec_unreadable: json', 'journal_entry_unreadable: 0', 'deadline_unreadable']),
    );
    const page = await fetch(`${url}/runs/${runId}`, { headers: producerAuth });
    expect(page.status).toBe(200);
  });
});

describe('every budget number the API accepts is bounded, and whatever it accepts runs', () => {
  const post = (url: string, body: unknown) =>
    fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...producerAuth },
      body: JSON.stringify(body),
    });

  it('a maxWallMs near Number.MAX_SAFE_INTEGER (or past LIMIT_MAX_WALL_MS) is a 400 naming the field, and nothing is written', async () => {
    h = await createHarness('lostbounds');
    const { url } = await h.startApi();
    const cases: [Record<string, unknown>, string][] = [
      [{ budget: { maxWallMs: Number.MAX_SAFE_INTEGER } }, 'budget.maxWallMs'],
      [{ budget: { maxWallMs: 24 * 3600_000 + 1 } }, 'budget.maxWallMs'],
      [{ budget: { maxTokens: 1e12 } }, 'budget.maxTokens'],
      [
        { agent: { model: 'scripted', script: [{ ...final, usage: { promptTokens: 1e300, completionTokens: 1 } }] } },
        'agent.script.0.usage.promptTokens',
      ],
    ];
    for (const [extra, field] of cases) {
      const ticket = sampleTicket(`LR-bound-${field}`);
      const res = await post(url, { tenant: 'acme', ticket, ...extra });
      expect(res.status, field).toBe(400);
      const body = (await res.json()) as { fields: { path: string }[] };
      expect(body.fields.map((f) => f.path)).toContain(field);
      expect(await h.ctx.store.exists(buildSpec(h.ctx, { tenant: 'acme', ticket }, Date.now()).runId)).toBe(false);
    }
  });

  it('the largest values the API can be configured to accept make a run that runs, and its view answers', async () => {
    // The hard limits of src/core/limits.ts as the deployment's limits.
    const max = { maxSteps: 10_000, maxTokens: 1_000_000_000, maxWallMs: 30 * 24 * 3600_000 };
    h = await createHarness('lostmax', {
      LIMIT_MAX_STEPS: String(max.maxSteps),
      LIMIT_MAX_TOKENS: String(max.maxTokens),
      LIMIT_MAX_WALL_MS: String(max.maxWallMs),
    });
    const { url } = await h.startApi();
    const tooBig = await post(url, {
      tenant: 'acme',
      ticket: sampleTicket('LR-max+1'),
      budget: { ...max, maxWallMs: max.maxWallMs + 1 },
    });
    expect(tooBig.status).toBe(400);
    await h.startWorker();
    const res = await post(url, {
      tenant: 'acme',
      ticket: sampleTicket('LR-max'),
      budget: max,
      agent: { model: 'scripted', script: [read, final] },
    });
    expect(res.status).toBe(201);
    const { runId } = (await res.json()) as { runId: string };
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const view = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({ status: 'completed', budget: { limits: max } });
  });
});
