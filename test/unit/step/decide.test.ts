/**
 * The decide stage without Redis: a journalled decision reused, the pre-flight, when a decision is journalled, the
 * model's failures.
 */
import { DelayedError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { RetryableError } from '../../../src/core/errors.js';
import { decide } from '../../../src/worker/step/decide.js';
import { Prompts } from '../../../src/worker/step/prompt.js';
import { MemoryJob } from './memoryStepStore.js';
import {
  agent,
  finalTurn,
  jobData,
  NOW,
  options,
  readTurn,
  specOf,
  stateOf,
  usage,
  world,
  writeTurn,
  type World,
} from './fixtures.js';

function setUp(w: World, over: Parameters<typeof stateOf>[2] = {}, specOver: Parameters<typeof specOf>[0] = {}) {
  const spec = specOf(specOver);
  w.store.addRun(spec);
  const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec));
  const state = stateOf(spec, job, over);
  const prompts = new Prompts(w.store, options.COMPLETION_TOKEN_CAP, () => '');
  return { spec, job, state, run: () => decide(w.env, prompts, state, agent) };
}

describe('decide', () => {
  it('reuses a journalled decision: the model is not asked again', async () => {
    const w = world({ turns: [finalTurn] });
    const decision = {
      v: 1 as const,
      kind: 'decision' as const,
      step: 1,
      model: 'queued',
      toolCalls: [],
      final: 'x',
      usage,
      attempts: 1,
    };
    const { state, run } = setUp(w, { decision });
    expect(await run()).toBeUndefined();
    expect(w.model.requests).toHaveLength(0);
    expect(state.decision).toBe(decision);
  });

  it('a read-only decision on a first delivery rides in the commit (nothing journalled yet)', async () => {
    const w = world({ turns: [readTurn()] });
    const { spec, state, run } = setUp(w);
    expect(await run()).toBeUndefined();
    expect(state.carriesDecision).toBe(true);
    expect(state.decision?.toolCalls.map((c) => c.name)).toEqual(['read_note']);
    expect(w.store.run(spec.runId).journal).toHaveLength(0);
  });

  it('a decision followed by a write is journalled at once, with its usage and the step_started event', async () => {
    const w = world({ turns: [writeTurn] });
    const { spec, state, run } = setUp(w);
    expect(await run()).toBeUndefined();
    const stored = w.store.run(spec.runId);
    expect(stored.journal.map((e) => e.kind)).toEqual(['decision']);
    expect(stored.events.map((e) => e.type)).toEqual(['step_started']);
    expect(state.carriesDecision).toBe(false);
    expect(state.startedEmitted).toBe(true);
    expect(state.used.tokens).toBe(12);
    expect(state.used.contextBytes).toBeGreaterThan(0);
  });

  it('a redelivery journals even a read-only decision (a concurrent delivery must find it)', async () => {
    const w = world({ turns: [readTurn()] });
    const { spec, run } = setUp(w, { redelivered: true });
    await run();
    expect(w.store.run(spec.runId).journal.map((e) => e.kind)).toEqual(['decision']);
  });

  it('dies at after_decision once the decision is journalled (crash point)', async () => {
    const w = world({ turns: [writeTurn], crash: ['after_decision'] });
    const { spec, run } = setUp(w);
    await expect(run()).rejects.toThrow('killed');
    expect(w.store.run(spec.runId).journal).toHaveLength(1);
  });

  it('the pre-flight stops a call that could exceed the token budget: no model call, budget_exceeded', async () => {
    const w = world({ turns: [finalTurn] });
    const { run } = setUp(
      w,
      {},
      { limits: { maxSteps: 10, maxTokens: 50, maxWallMs: 60_000, deadlineAt: NOW + 60_000 } },
    );
    const plan = await run();
    expect(plan?.status).toBe('budget_exceeded');
    expect(plan?.reason).toMatch(/^tokens/);
    expect(w.model.requests).toHaveLength(0);
    const stops = await w.env.metrics.budgetStops.get();
    expect(stops.values.find((v) => v.labels.kind === 'tokens')?.value).toBe(1);
  });

  it('a provider that reports no usage fails the run (never zero)', async () => {
    const w = world({ turns: [{ toolCalls: [], final: 'x' }] });
    const { run } = setUp(w);
    const plan = await run();
    expect(plan).toMatchObject({ status: 'failed', advance: false });
    expect(plan?.reason).toMatch(/^missing_usage/);
  });

  it('a provider outage delays the job with the time of its first failure, and charges the failed attempts', async () => {
    const billed = new RetryableError('slow down', 5, { usage: { promptTokens: 3, completionTokens: 0 } });
    const w = world({ turns: [billed] });
    const { spec, job, run } = setUp(w);
    await expect(run()).rejects.toBeInstanceOf(DelayedError);
    expect(job.delayedUntil).toBe(w.clock.now + 5);
    expect(job.updates[0]?.outageSince).toBe(w.clock.now);
    expect(w.store.charged).toEqual([{ runId: spec.runId, step: 1, tokens: 3 }]);
  });

  it("a provider's own copy of the engine's retryable error is read by its code: the same delay, the same charge", async () => {
    // An agents module that resolved another copy of the package throws errors of another class with the same meaning.
    class ForeignRetryable extends Error {
      readonly code = 'transient';
      readonly retry = 'retryable';
      readonly retryAfterMs = 5;
      readonly details = { usage: { promptTokens: 3, completionTokens: 0 } };
    }
    const w = world({ turns: [new ForeignRetryable('slow down')] });
    const { spec, job, run } = setUp(w);
    await expect(run()).rejects.toBeInstanceOf(DelayedError);
    expect(job.delayedUntil).toBe(w.clock.now + 5);
    expect(w.store.charged).toEqual([{ runId: spec.runId, step: 1, tokens: 3 }]);
  });

  it('a follow-up whose previous run is at work waits: the job is delayed, nothing is asked of the model', async () => {
    const w = world({ turns: [finalTurn] });
    w.env = { ...w.env, followUps: { context: async () => ({ waitingFor: 'running' }), known: () => '' } };
    const { job, run } = setUp(w);
    await expect(run()).rejects.toBeInstanceOf(DelayedError);
    expect(job.delayedUntil).toBe(w.clock.now + options.FOLLOW_UP_WAIT_MS);
    expect(w.model.requests).toHaveLength(0);
  });
});

describe("the tenant's token day", () => {
  it('an attempt in flight at midnight settles on the day it reserved on, not the day it ended', async () => {
    const w = world({ turns: [finalTurn] });
    const calls: { op: string; at: number }[] = [];
    Object.assign(w.env.tenant, {
      reserve: async (_tenant: string, _amount: number, at: number) => void calls.push({ op: 'reserve', at }),
      settle: async (_tenant: string, _delta: number, at: number) => void calls.push({ op: 'settle', at }),
    });
    // The model answers after midnight (UTC) of the day the attempt reserved on.
    const complete = w.model.complete.bind(w.model);
    w.model.complete = async (req) => {
      w.clock.now += 86_400_000;
      return complete(req);
    };
    const { run } = setUp(w);
    expect(await run()).toBeUndefined();
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    expect(calls.map((c) => [c.op, day(c.at)])).toEqual([
      ['reserve', day(NOW)],
      ['settle', day(NOW)],
    ]);
  });
});
