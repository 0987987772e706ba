/**
 * The durable step engine against real Redis: journal order, budget
 * accounting, the fence (duplicate and stale deliveries), the three budget
 * stops (steps, tokens, deadline).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from 'bullmq';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { type ScriptedProvider } from '../../src/models/scripted.js';
import { buildSpec } from '../../src/producer/intake.js';
import { StepProcessor } from '../../src/worker/step/processor.js';
import { RunSpecCache } from '../../src/runs/store.js';
import { CrashPoints } from '../../src/config/testHooks.js';
import type { Script, ScriptTurn } from '../../src/models/scriptedTurns.js';
import { encodeEntry, estimateTokens } from '../../src/core/journal.js';
import { isContext, toolSchemaTokens } from '../../src/budget/policy.js';

const readTurn = (i: number) => ({
  toolCalls: [{ name: 'read_ticket', args: {} }],
  usage: { promptTokens: 100 + i, completionTokens: 10 },
  transientFailures: 0,
});
const finalTurn = {
  toolCalls: [],
  final: 'done',
  usage: { promptTokens: 50, completionTokens: 5 },
  transientFailures: 0,
};

function scriptOf(steps: number): ScriptTurn[] {
  return [...Array.from({ length: steps - 1 }, (_, i) => readTurn(i + 1)), finalTurn];
}

let h: Harness;
beforeAll(async () => {
  h = await createHarness('engine');
});
afterAll(async () => {
  await h.close();
});

async function create(
  ticketId: string,
  script: Script | undefined,
  budget: Record<string, number> = {},
  body?: string,
) {
  const ticket = { ...sampleTicket(ticketId), ...(body ? { body } : {}) };
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket, budget, agent: { model: 'scripted', ...(script ? { script } : {}) } },
    Date.now(),
  );
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  return spec.runId;
}

function provider(): ScriptedProvider {
  return h.ctx.providers.get('scripted') as ScriptedProvider;
}

describe('step engine', () => {
  it('runs a 20-step scripted run: 20 steps journalled in order, budget equals the script usage', async () => {
    await h.startWorker();
    const script = scriptOf(20);
    const runId = await create('T-20', script, { maxSteps: 20 });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
    const transcript = await h.ctx.store.transcript(runId);
    const decisions = transcript.filter((e) => e.kind === 'decision');
    expect(decisions.map((d) => d.step)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const observations = transcript.filter((e) => e.kind === 'observation');
    expect(observations).toHaveLength(19);
    expect(observations.every((o) => o.status === 'ok')).toBe(true);
    const state = await h.ctx.store.readState(runId);
    const expectedTokens = script.reduce((s, t) => s + t.usage!.promptTokens + t.usage!.completionTokens, 0);
    expect(state?.used.tokens).toBe(expectedTokens);
    expect(state?.used.steps).toBe(20);
    expect(state?.cursor).toBe(21);
  });

  it('stops a run whose steps run out as budget_exceeded with the reason', async () => {
    const runId = await create('T-steps', scriptOf(10), { maxSteps: 3 });
    expect(await h.waitForStatus(runId, ['completed', 'budget_exceeded'])).toBe('budget_exceeded');
    const state = await h.ctx.store.readState(runId);
    expect(state?.reason).toMatch(/^steps: 3 of 3/);
    expect(state?.used.steps).toBe(3);
  });

  it('the token cap raises: the run stops before the call that could exceed it', async () => {
    const before = provider().calls;
    // Each step costs ~111 tokens; the estimate adds the completion cap (1024) and the serialized run input.
    const runId = await create('T-cap', scriptOf(30), { maxTokens: 2000 });
    expect(await h.waitForStatus(runId, ['completed', 'budget_exceeded'])).toBe('budget_exceeded');
    const state = await h.ctx.store.readState(runId);
    expect(state?.reason).toMatch(/^tokens: used \d+ \+ estimate \d+ > cap 2000/);
    expect(state!.used.tokens).toBeLessThanOrEqual(2000);
    const calls = provider().calls - before;
    expect(calls).toBe(state!.used.steps);
    expect(calls).toBeLessThan(30);
  });

  it('the transcript byte bound never stops a call: the stop is made on the exact token count, where counting every entry stops it', async () => {
    const runId = await create('T-cap-exact', scriptOf(30), { maxTokens: 2500 });
    expect(await h.waitForStatus(runId, ['completed', 'budget_exceeded'])).toBe('budget_exceeded');
    const state = (await h.ctx.store.readState(runId))!;
    const [, used, estimate] = /^tokens: used (\d+) \+ estimate (\d+) > cap 2500/.exec(state.reason)!.map(Number);
    const spec = (await h.ctx.store.readSpec(runId))!;
    const agent = h.ctx.agents.get(spec.agent)!;
    const context = (await h.ctx.store.transcript(runId)).filter((e) => isContext(e.kind));
    const fixed =
      agent.estimateInputTokens(spec.input) + toolSchemaTokens(agent.tools.specs) + h.cfg.COMPLETION_TOKEN_CAP;
    // The stop names the tokenizer's count of the transcript, not its byte bound (which is larger and would have stopped sooner).
    const tokens = context.reduce((s, e) => s + estimateTokens(encodeEntry(e)), 0);
    const bytes = context.reduce((s, e) => s + Buffer.byteLength(encodeEntry(e)), 0);
    expect(estimate).toBe(tokens + fixed);
    expect(used! + bytes + fixed).toBeGreaterThan(2500);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).budget, 'contextBytes')).toBe(String(bytes));
  });

  it('an over-cap transcript never reaches the model', async () => {
    const before = provider().calls;
    const runId = await create('T-big', scriptOf(3), { maxTokens: 5000 }, 'x'.repeat(40_000));
    expect(await h.waitForStatus(runId, ['completed', 'budget_exceeded'])).toBe('budget_exceeded');
    expect(provider().calls - before).toBe(0);
    expect((await h.ctx.store.readState(runId))?.used.tokens).toBe(0);
  });

  it('missing usage from the provider is an error, never zero', async () => {
    const script: Script = [
      readTurn(1),
      { toolCalls: [{ name: 'read_ticket', args: {} }], transientFailures: 0 },
      finalTurn,
    ];
    const runId = await create('T-nousage', script);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('failed');
    const state = await h.ctx.store.readState(runId);
    expect(state?.reason).toMatch(/^missing_usage/);
    expect(state?.used.steps).toBe(1);
  });

  it('retries transient model failures in code, charges every attempt, keeps retries out of the transcript', async () => {
    const script: Script = [
      { ...readTurn(1), transientFailures: 2, failureUsage: { promptTokens: 7, completionTokens: 0 } },
      finalTurn,
    ];
    const runId = await create('T-retry', script);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const transcript = await h.ctx.store.transcript(runId);
    const first = transcript.find((e) => e.kind === 'decision' && e.step === 1);
    expect(first && first.kind === 'decision' && first.attempts).toBe(3);
    expect(transcript.filter((e) => e.kind === 'decision')).toHaveLength(2);
    expect((await h.ctx.store.readState(runId))?.used.tokens).toBe(101 + 10 + 14 + 55);
  });

  it('failed attempts count: three transient failures and a success never take a run past maxTokens', async () => {
    // Each attempt bills 1,226 tokens; the pre-flight estimate of one attempt is ~1,260 (serialized input + completion cap).
    // Unchecked, four attempts took a 2,000-token run to 4,904.
    const billed = { promptTokens: 1100, completionTokens: 126 };
    const script: Script = [{ ...readTurn(1), usage: billed, transientFailures: 3, failureUsage: billed }, finalTurn];
    const before = provider().calls;
    const runId = await create('T-retry-cap', script, { maxTokens: 2000 });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('budget_exceeded');
    const state = await h.ctx.store.readState(runId);
    // Checked before the second attempt: what it may spend does not fit beside what the first spent.
    expect(state?.reason).toMatch(/^tokens: used 1226 \+ estimate \d+ > cap 2000/);
    expect(state?.used.tokens).toBe(1226);
    expect(provider().calls - before).toBe(1);
    // The budget hash itself holds the true spend, charged once.
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).budget, 'tokensUsed')).toBe('1226');
  });

  it('a successful attempt that reports more than the run has left stops the run with the figures, charged', async () => {
    const script: Script = [{ ...readTurn(1), usage: { promptTokens: 2500, completionTokens: 100 } }, finalTurn];
    const runId = await create('T-over', script, { maxTokens: 2000 });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('budget_exceeded');
    const state = await h.ctx.store.readState(runId);
    expect(state?.reason).toMatch(/^tokens: used 2600 of cap 2000/);
    expect(state?.used.tokens).toBe(2600);
    // The over-budget decision is not acted on: no tool ran.
    expect((await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'observation')).toHaveLength(0);
  });

  it('invalid tool arguments become a format-error observation the model sees, not a crash', async () => {
    const script: Script = [
      {
        toolCalls: [{ name: 'lookup_customer', args: { email: 'not-an-email' } }],
        usage: { promptTokens: 1, completionTokens: 1 },
        transientFailures: 0,
      },
      finalTurn,
    ];
    const runId = await create('T-badargs', script);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const obs = (await h.ctx.store.transcript(runId)).find((e) => e.kind === 'observation');
    expect(obs && obs.kind === 'observation' && obs.status).toBe('format_error');
  });
});

describe('the commit fence', () => {
  it('a step delivered twice (lock moved after a false stall) and a stale job after the commit commit once', async () => {
    const hf = await createHarness('fence');
    try {
      const spec = buildSpec(
        hf.ctx,
        { tenant: 'acme', ticket: sampleTicket('T-fence'), agent: { model: 'scripted', script: scriptOf(3) } },
        Date.now(),
      );
      await hf.ctx.store.create(spec, Date.now());
      const queue = hf.ctx.queues.forRun(spec.runId);
      const manual = new Worker(queue.name, null, {
        connection: hf.ctx.redis,
        prefix: hf.ctx.keys.bullPrefix,
        lockDuration: 60_000,
      });
      const processor = new StepProcessor({
        cfg: hf.cfg,
        redis: hf.ctx.redis,
        keys: hf.ctx.keys,
        store: hf.ctx.store,
        specs: new RunSpecCache(hf.ctx.store),
        agents: hf.ctx.agents,
        providers: hf.ctx.providers,
        metrics: hf.ctx.metrics,
        log: hf.ctx.log,
        crash: new CrashPoints([]),
      });
      const job = await manual.getNextJob('token-A');
      expect(job.id).toBe(`${spec.runId}.s1`);
      const lockKey = hf.ctx.keys.jobLock(hf.ctx.keys.shardOf(spec.runId), job.id!);
      // A false stall: another worker now holds the lock with token B.
      await hf.ctx.redis.set(lockKey, 'token-B');
      const signal = new AbortController().signal;
      await processor.process(job, 'token-A', signal);
      expect(await hf.ctx.store.transcript(spec.runId)).toHaveLength(0);
      expect((await hf.ctx.store.readState(spec.runId))?.cursor).toBe(1);
      // The new owner commits.
      await processor.process(job, 'token-B', signal);
      const afterFirst = await hf.ctx.store.transcript(spec.runId);
      expect(afterFirst.map((e) => `${e.kind}:${e.step}`)).toEqual(['decision:1', 'observation:1']);
      // The same job delivered again after its commit: refused, only ensures step 2's job exists.
      job.attemptsStarted = 2;
      await processor.process(job, 'token-B', signal);
      expect(await hf.ctx.store.transcript(spec.runId)).toHaveLength(2);
      expect((await hf.ctx.store.readState(spec.runId))?.used.steps).toBe(1);
      expect(await queue.getJobState(`${spec.runId}.s2`)).toBe('waiting');
      expect(hf.ctx.metrics.fenceRejections).toBeDefined();
      await manual.close();
    } finally {
      await hf.close();
    }
  });
});
