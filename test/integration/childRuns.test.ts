/**
 * Agents that call agents, on real Redis with a real worker: an agent tool starts a child run (its own run id,
 * journal and budget carved out of the parent's), the parent parks `waiting_child` and resumes with the child's
 * answer, or its stop as a tool error; a parent with 1,000 tokens left cannot have a child spend 1,001; the
 * child's spend is charged to the parent with the resume; a child is started once per parent call; cancel
 * cascades down the tree; a child whose parent ended ends too; the run view shows the tree. Several agent-tool
 * calls in one turn start a child each: the parent waits for all of them and resumes with each result in the order
 * the model asked, the children sharing what it has left (together never more), charged once; a step redelivered
 * after its first child started finds that child and starts the others.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { defineAgent, defineAgentTool, defineReadTool, defineWaitTool } from '../../src/index.js';
import { createContext } from '../../src/server/buildContext.js';
import { buildSpec } from '../../src/producer/intake.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import { toMessages } from '../../src/models/aiSdk.js';
import { CrashPoints } from '../../src/config/testHooks.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { childRunsOf } from '../../src/runs/children.js';
import { stopRun } from '../../src/runs/stop.js';
import { runView } from '../../src/http/runView.js';
import { cancelRun } from '../../src/operations/cancel.js';
import type { ObservationEntry } from '../../src/core/journal.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { until } from '../../testkit/until.js';

/** A tool's duration (the work a slow child does). */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const usage = { promptTokens: 50, completionTokens: 10 };
/** What the child's scripted model would spend per turn, if let: under each turn's estimate, as a real model's is. */
const spendy = { promptTokens: 100, completionTokens: 20 };

const kidInput = z
  .object({ id: z.string(), mode: z.enum(['answer', 'late', 'spend', 'fail', 'sleep', 'nest', 'slow']) })
  .strict();
type KidInput = z.infer<typeof kidInput>;

const kid = defineAgent<KidInput>({
  name: 'kid',
  version: 'kid@1',
  input: kidInput,
  key: (i) => i.id,
  instructions: () => 'Do the job.',
  prompt: (i) => `job ${i.id}`,
  tools: [
    defineReadTool({
      name: 'noop',
      description: 'reads nothing',
      args: z.object({ ms: z.number().optional() }),
      execute: async ({ ms }) => (ms ? await sleep(ms) : undefined, { ok: true }), // the tool's duration
    }),
    defineWaitTool({
      name: 'nap',
      description: 'sleeps a minute',
      args: z.object({}),
      wait: () => ({ kind: 'sleep', forMs: 60_000 }),
    }),
    defineAgentTool({
      name: 'call_grandkid',
      description: 'hands work to another kid',
      args: z.object({ id: z.string() }),
      agent: 'kid',
      input: ({ id }) => ({ id, mode: 'sleep' }),
    }),
  ],
  demoScript: ({ id, mode }): unknown[] => {
    if (mode === 'answer') return [{ final: `kid ${id} answered`, usage }];
    if (mode === 'late')
      return [
        { toolCalls: [{ name: 'noop', args: { ms: 300 } }], usage },
        { final: `kid ${id} answered late`, usage },
      ];
    if (mode === 'spend') return Array.from({ length: 30 }, () => ({ toolCalls: [{ name: 'noop' }], usage: spendy }));
    if (mode === 'fail') return [{ toolCalls: [] }]; // no usage: the provider's answer is an error, the run fails
    if (mode === 'slow')
      return Array.from({ length: 6 }, () => ({ toolCalls: [{ name: 'noop', args: { ms: 300 } }], usage }));
    if (mode === 'nest') return [{ toolCalls: [{ name: 'call_grandkid', args: { id: `g-${id}` } }], usage }];
    return [
      { toolCalls: [{ name: 'nap' }], usage },
      { final: 'slept', usage },
    ];
  },
});

const boss = defineAgent<{ id: string; mode: KidInput['mode'] }>({
  name: 'boss',
  version: 'boss@1',
  input: z.object({ id: z.string(), mode: kidInput.shape.mode }).strict(),
  key: (i) => i.id,
  instructions: () => 'Delegate.',
  tools: [
    defineAgentTool({
      name: 'delegate',
      description: 'hands the job to a kid',
      args: z.object({ id: z.string(), mode: kidInput.shape.mode }),
      agent: 'kid',
      input: (a) => a,
    }),
  ],
});

let h: Harness;
let ctx: EngineContext;
/** Armed by a test: the next child start throws, as a process dying there would stop the step (a redelivery). */
let failNextChildStart = false;
const crash = new CrashPoints(['after_child_started'], () => {
  if (!failNextChildStart) return;
  failNextChildStart = false;
  throw new Error('stopped at after_child_started');
});
beforeAll(async () => {
  h = await createHarness('children', { COMPLETION_TOKEN_CAP: '100', MODEL_MAX_ATTEMPTS: '1' });
  ctx = await createContext(h.cfg, 'children', { agents: [boss, kid] });
  await h.startWorker({ crash }, ctx);
});
afterAll(async () => {
  await h.close();
});

const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];

/**
 * A boss run whose step 1 hands `mode` to a kid (spending `first`), then answers; with several modes, one kid each,
 * all asked in the same turn (`k-<id>-<n>`).
 */
async function startBoss(
  id: string,
  mode: KidInput['mode'] | KidInput['mode'][],
  budget = {},
  first = usage,
): Promise<string> {
  const calls = Array.isArray(mode)
    ? mode.map((m, n) => ({ name: 'delegate', args: { id: `k-${id}-${n}`, mode: m } }))
    : [{ name: 'delegate', args: { id: `k-${id}`, mode } }];
  const turns = [
    { toolCalls: calls, usage: first },
    { final: 'boss done', usage },
  ];
  const spec = buildSpec(
    ctx,
    {
      tenant: 'acme',
      agent: 'boss',
      input: { id, mode: Array.isArray(mode) ? mode[0]! : mode },
      model: 'scripted',
      script: scriptSchema.parse(turns),
      budget,
    },
    Date.now(),
  );
  await ctx.store.create(spec, Date.now());
  return spec.runId;
}

async function onlyChild(runId: string): Promise<string> {
  const ids = await until(`a child of ${runId}`, 10_000, async () => {
    const ids = await childRunsOf(ctx).childrenOf(runId);
    return ids.length > 0 && ids;
  });
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

async function childObservation(runId: string): Promise<ObservationEntry> {
  const obs = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');
  expect(obs).toHaveLength(1);
  return obs[0] as ObservationEntry;
}

async function used(runId: string): Promise<{ steps: number; tokens: number }> {
  return (await ctx.store.readState(runId))!.used;
}

async function counted(event: string, outcome: string): Promise<number> {
  const values = (await ctx.metrics.childRuns.get()).values;
  return values.find((v) => v.labels.event === event && v.labels.outcome === outcome)?.value ?? 0;
}

describe('agents that call agents', () => {
  it("the child's answer is the call's result; its spend is charged to the parent; the view shows the tree", async () => {
    const endedBefore = await counted('ended', 'completed');
    const parent = await startBoss('A-1', 'answer');
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ENDED)).toBe('completed');
    const obs = await childObservation(parent);
    expect(obs).toMatchObject({
      status: 'ok',
      tool: 'delegate',
      output: { childRunId: child, answer: 'kid k-A-1 answered' },
    });
    // The parent's model saw the answer as the tool's result.
    const results = toMessages(await ctx.store.transcript(parent)).filter((m) => m.role === 'tool');
    expect(JSON.stringify(results)).toContain('kid k-A-1 answered');
    // Charged: the parent's two steps and 120 tokens, plus the child's one step and 60.
    expect(await used(child)).toMatchObject({ steps: 1, tokens: 60 });
    expect(await used(parent)).toMatchObject({ steps: 3, tokens: 180 });
    const childSpec = (await ctx.store.readSpec(child))!;
    expect(childSpec).toMatchObject({ tenant: 'acme', agent: 'kid', parent: { runId: parent, step: 1 } });
    expect(childSpec.limits.deadlineAt).toBeLessThanOrEqual((await ctx.store.readSpec(parent))!.limits.deadlineAt);
    const view = await runView(ctx, parent);
    expect(view?.children).toEqual([{ runId: child, status: 'completed' }]);
    expect((await runView(ctx, child))?.parentRunId).toBe(parent);
    const statuses = (await readRunEvents(ctx, parent)).filter((e) => e.type === 'status_changed').map((e) => e.data);
    expect(statuses.some((s) => s.includes('waiting_child') && s.includes(child))).toBe(true);
    expect(await counted('ended', 'completed')).toBe(endedBefore + 1);
  });

  it('a parent with 1,000 tokens left cannot have a child spend 1,001', async () => {
    // Step 1 spends 200 of 1,200: 1,000 left. The child's model would spend 120 a turn for 30 turns.
    const parent = await startBoss(
      'B-1',
      'spend',
      { maxTokens: 1200, maxSteps: 40 },
      { promptTokens: 150, completionTokens: 50 },
    );
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ENDED)).toBe('budget_exceeded');
    expect((await ctx.store.readSpec(child))!.limits.maxTokens).toBe(1000);
    const spent = await used(child);
    // It spent turns until the next one's estimate no longer fitted in 1,000: never past them.
    expect(spent.tokens).toBeGreaterThanOrEqual(3 * 120);
    expect(spent.tokens).toBeLessThanOrEqual(1000);
    expect((await ctx.store.readState(child))!.reason).toMatch(/^tokens: .* > cap 1000$/);
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
    // Charged to the parent with its resume: its own 200 + 60 and the child's, never past its 1,200.
    expect((await used(parent)).tokens).toBe(200 + spent.tokens + 60);
    expect((await used(parent)).tokens).toBeLessThanOrEqual(1200);
    expect(await childObservation(parent)).toMatchObject({
      status: 'tool_error',
      output: { error: 'child_budget_exceeded', childRunId: child, status: 'budget_exceeded' },
    });
  });

  it("a child that fails is a tool error the parent's model sees, and the parent goes on", async () => {
    const parent = await startBoss('C-1', 'fail');
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ENDED)).toBe('failed');
    const obs = await childObservation(parent);
    expect(obs).toMatchObject({ status: 'tool_error', output: { error: 'child_failed', childRunId: child } });
    expect((obs.output as { reason: string }).reason).not.toBe('');
    const results = toMessages(await ctx.store.transcript(parent)).filter((m) => m.role === 'tool');
    expect(JSON.stringify(results)).toContain('child_failed');
  });

  it('a redelivered call finds the child it started: one child per parent run, step and call', async () => {
    const parentRunId = 'r_' + 'c'.repeat(24);
    const req = {
      parent: { runId: parentRunId, step: 3, callId: 'call_3_0', tenant: 'acme', deadlineAt: Date.now() + 60_000 },
      agent: 'kid',
      input: { id: 'D-1', mode: 'answer' },
      limits: { maxSteps: 3, maxTokens: 500, deadlineAt: Date.now() + 30_000 },
      now: Date.now(),
    };
    const first = await ctx.childRuns!.start(req);
    const again = await ctx.childRuns!.start({ ...req, now: Date.now() + 5 });
    expect(first).toMatchObject({ kind: 'started', created: true });
    expect(again).toEqual({ kind: 'started', runId: (first as { runId: string }).runId, created: false });
    expect(await childRunsOf(ctx).childrenOf(parentRunId)).toEqual([(first as { runId: string }).runId]);
    // Input the child agent's schema refuses: nothing written, the fields named.
    const bad = await ctx.childRuns!.start({ ...req, parent: { ...req.parent, callId: 'call_3_1' }, input: { id: 1 } });
    expect(bad).toMatchObject({
      kind: 'refused',
      error: 'invalid_input',
      fields: expect.arrayContaining([{ path: 'input.id', message: expect.any(String) }]),
    });
    expect(await childRunsOf(ctx).childrenOf(parentRunId)).toHaveLength(1);
  });

  it('cancel of a parent cancels its children and theirs', async () => {
    const parent = await startBoss('E-1', 'nest');
    const child = await onlyChild(parent);
    const grandchild = await onlyChild(child);
    expect(await h.waitForStatus(grandchild, ['sleeping'])).toBe('sleeping');
    expect(await h.waitForStatus(child, ['waiting_child'])).toBe('waiting_child');
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');
    expect((await cancelRun(ctx, { name: 'ops-ada', tenants: '*' }, parent)).kind).toBe('done');
    for (const id of [parent, child, grandchild]) expect(await h.waitForStatus(id, ENDED)).toBe('cancelled');
    expect((await ctx.store.readState(grandchild))!.reason).toBe(`parent_cancelled: ${child}`);
    // Nothing left in the queue to wake any of them.
    for (const id of [parent, child, grandchild]) {
      const jobId = (await ctx.store.readState(id))!.jobId;
      expect(await ctx.queues.forRun(id).getJob(jobId)).toBeUndefined();
    }
  });

  it("a child cancelled on its own: the cancel is done when its parent's wake meets a store error, which is named", async () => {
    const parent = await startBoss('E-3', 'sleep');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ['sleeping'])).toBe('sleeping');
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');
    // The parent's wake job comes back with a promotion that fails as a dropped connection does.
    const queue = ctx.queues.forRun(parent);
    const getJob = queue.getJob.bind(queue);
    queue.getJob = async (jobId: string) => {
      const job = await getJob(jobId);
      if (job) job.promote = () => Promise.reject(new Error('Connection is closed.'));
      return job;
    };
    const warn = vi.spyOn(ctx.log, 'warn');
    let codes: unknown[];
    try {
      // The cancel took effect before the wake: answering it with the wake's error would say it had not.
      expect((await cancelRun(ctx, { name: 'ops-ada', tenants: '*' }, child)).kind).toBe('done');
      codes = warn.mock.calls.map(([fields]) => (fields as { code?: string }).code);
    } finally {
      queue.getJob = getJob;
      warn.mockRestore();
    }
    expect(codes).toContain('child_wake_failed');
    expect(await h.waitForStatus(child, ENDED)).toBe('cancelled');
    // What the stuck-run sweep does for it: the parent resumes with the cancel as the call's tool error.
    expect(await childRunsOf(ctx).wakeIfChildEnded(parent)).toBe(true);
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
  });

  it('a child whose parent ended without the cascade ends at its next step', async () => {
    const orphanedBefore = await counted('orphaned', 'cancelled');
    const parent = await startBoss('F-1', 'slow');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');
    // The parent ends as an API process that died before the cascade would leave it.
    await stopRun(ctx, parent, { expected: ['waiting_child'], status: 'cancelled', reason: 'test', now: Date.now() });
    expect(await h.waitForStatus(child, ENDED)).toBe('cancelled');
    expect((await ctx.store.readState(child))!.reason).toBe(`parent_ended: ${parent} cancelled`);
    expect((await used(child)).steps).toBeLessThan(6);
    expect(await counted('orphaned', 'cancelled')).toBe(orphanedBefore + 1);
  });

  describe('several agent-tool calls in one turn', () => {
    /** A parent's children, in the order its calls asked (their observations'). */
    async function childrenInOrder(parent: string): Promise<string[]> {
      const obs = (await ctx.store.transcript(parent)).filter((e): e is ObservationEntry => e.kind === 'observation');
      return obs.map((o) => (o.output as { childRunId: string }).childRunId);
    }

    it('start a child each; the parent waits for all and resumes with each result in the order asked, charged once', async () => {
      const endedBefore = await counted('ended', 'completed');
      // The first kid asked is the last to finish.
      const parent = await startBoss('P-1', ['late', 'answer']);
      expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
      const ids = await childRunsOf(ctx).childrenOf(parent);
      expect(ids).toHaveLength(2);
      const [late, quick] = await childrenInOrder(parent);
      expect([late, quick].sort()).toEqual(ids);
      const obs = (await ctx.store.transcript(parent)).filter((e) => e.kind === 'observation');
      expect(obs.map((o) => o.output)).toEqual([
        { childRunId: late, answer: 'kid k-P-1-0 answered late' },
        { childRunId: quick, answer: 'kid k-P-1-1 answered' },
      ]);
      const results = toMessages(await ctx.store.transcript(parent)).filter((m) => m.role === 'tool');
      expect(JSON.stringify(results).indexOf('answered late')).toBeLessThan(
        JSON.stringify(results).indexOf('k-P-1-1 answered'),
      );
      // Charged once, with the one resume: the parent's 2 steps and 120 tokens, the late kid's 2 and 120, the other's 1 and 60.
      expect(await used(late!)).toMatchObject({ steps: 2, tokens: 120 });
      expect(await used(quick!)).toMatchObject({ steps: 1, tokens: 60 });
      expect(await used(parent)).toMatchObject({ steps: 5, tokens: 300 });
      const events = await readRunEvents(ctx, parent);
      const woke = events.filter((e) => e.type === 'woke').map((e) => JSON.parse(e.data) as unknown);
      expect(woke).toEqual([
        expect.objectContaining({
          kind: 'child',
          children: [
            { runId: late, status: 'completed' },
            { runId: quick, status: 'completed' },
          ],
        }),
      ]);
      const parked = events.filter((e) => e.type === 'status_changed').map((e) => e.data);
      expect(parked.some((p) => p.includes('waiting_child') && p.includes(late!) && p.includes(quick!))).toBe(true);
      expect(await counted('ended', 'completed')).toBe(endedBefore + 2);
    });

    it('share what the parent has left: two children together cannot spend more than its 1,000 tokens', async () => {
      const parent = await startBoss(
        'P-2',
        ['spend', 'spend'],
        { maxTokens: 1200, maxSteps: 40 },
        { promptTokens: 150, completionTokens: 50 },
      );
      expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
      const kids = await childRunsOf(ctx).childrenOf(parent);
      expect(kids).toHaveLength(2);
      let spent = 0;
      for (const k of kids) {
        expect((await ctx.store.readSpec(k))!.limits.maxTokens).toBe(500);
        expect((await ctx.store.readState(k))!.status).toBe('budget_exceeded');
        spent += (await used(k)).tokens;
      }
      expect(spent).toBeLessThanOrEqual(1000);
      expect((await used(parent)).tokens).toBe(200 + spent + 60);
      expect((await used(parent)).tokens).toBeLessThanOrEqual(1200);
    });

    it("a failing child is that call's tool error; the other's answer comes back", async () => {
      const parent = await startBoss('P-3', ['fail', 'answer']);
      expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
      const [failed, answered] = await childrenInOrder(parent);
      const obs = (await ctx.store.transcript(parent)).filter((e): e is ObservationEntry => e.kind === 'observation');
      expect(obs.map((o) => [o.status, (o.output as { error?: string }).error])).toEqual([
        ['tool_error', 'child_failed'],
        ['ok', undefined],
      ]);
      expect(obs[0]!.output).toMatchObject({ childRunId: failed, status: 'failed' });
      expect(obs[1]!.output).toEqual({ childRunId: answered, answer: 'kid k-P-3-1 answered' });
    });

    it('a step stopped after its first child started: the redelivery finds that child and starts the other', async () => {
      const startedBefore = await counted('started', 'created');
      failNextChildStart = true;
      const parent = await startBoss('P-4', ['answer', 'answer']);
      expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
      expect(failNextChildStart).toBe(false);
      const kids = await childRunsOf(ctx).childrenOf(parent);
      expect(kids).toHaveLength(2);
      expect(await counted('started', 'created')).toBe(startedBefore + 2);
      expect((await childrenInOrder(parent)).sort()).toEqual(kids);
      expect(await used(parent)).toMatchObject({ steps: 4, tokens: 240 });
    });
  });
});
