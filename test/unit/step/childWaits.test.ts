/**
 * Agent-tool calls without Redis (src/worker/step/waitCalls.ts, wake.ts), over a child port that keeps its children
 * in memory: two agent-tool calls in one turn start a child each with half of what the run has left, and park the
 * run once on both (a sleep asked in the same turn is a format error); the wake job waits while one child is at
 * work, then marks each child taken, journals each child's result in the order the model asked and charges their
 * spend once; a child found back at work when it is marked keeps the run waiting.
 */
import { DelayedError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, defineAgentTool, defineWaitTool, type Agent } from '../../../src/core/agent.js';
import type { ModelTurn } from '../../../src/core/model.js';
import type { ChildOutcome, ChildStartRequest } from '../../../src/runs/children.js';
import type { ChildRunPort, StepEnv } from '../../../src/worker/step/env.js';
import { StepPipeline } from '../../../src/worker/step/pipeline.js';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, jobData, NOW, specOf, usage, world } from './fixtures.js';

const agent: Agent = defineAgent({
  name: 'echo',
  version: 'echo@1',
  input: z.object({ text: z.string() }),
  instructions: () => 'Delegate.',
  tools: [
    defineAgentTool({
      name: 'delegate',
      description: 'hands a job to a helper',
      args: z.object({ job: z.string() }),
      agent: 'helper',
      input: (a) => a,
    }),
    defineWaitTool({
      name: 'nap',
      description: 'sleeps',
      args: z.object({ ms: z.number() }),
      wait: ({ ms }) => ({ kind: 'sleep', forMs: ms }),
    }),
  ],
});

/** Children in memory: started by the step, their outcomes set by the test; the parent that took each one's outcome. */
class Children implements ChildRunPort {
  readonly started: ChildStartRequest[] = [];
  readonly outcomes = new Map<string, ChildOutcome>();
  readonly taken = new Map<string, string>();
  /** A child an operator puts back to work between the wake's read and its mark (the mark then finds it at work). */
  backToWorkAtTake: string | undefined;
  async start(req: ChildStartRequest) {
    this.started.push(req);
    const runId = `r_${String(this.started.length).padStart(24, '0')}`;
    this.outcomes.set(runId, { ended: false, status: 'running', reason: '', steps: 0, tokens: 0, actions: [] });
    return { kind: 'started' as const, runId, created: true };
  }
  async earlier() {
    return undefined;
  }
  async outcome(id: string) {
    return this.outcomes.get(id)!;
  }
  async take(id: string, parentRunId: string, atDeadline: boolean) {
    if (id === this.backToWorkAtTake)
      this.outcomes.set(id, { ...this.outcomes.get(id)!, ended: false, status: 'running' });
    if (!atDeadline && !this.outcomes.get(id)!.ended) return 'at_work' as const;
    this.taken.set(id, parentRunId);
    return 'taken' as const;
  }
  async allEnded(children: readonly { runId: string }[]) {
    return children.every((c) => this.outcomes.get(c.runId)!.ended);
  }
  async parentStanding() {
    return undefined;
  }
  async wakeParent() {
    return false;
  }
  async wakeIfChildEnded() {
    return false;
  }
}

const delegate = (job: string) => ({ id: `c-${job}`, name: 'delegate', args: { job } });
const done: ModelTurn = { toolCalls: [], final: 'done', usage };

function setup(turns: ModelTurn[]) {
  const w = world({ turns });
  const children = new Children();
  const env: StepEnv = { ...w.env, children, agents: { ...w.env.agents, agentFor: () => agent } };
  const spec = specOf({ toolsHash: agent.tools.schemaHash });
  w.store.addRun(spec);
  return { w, children, pipeline: new StepPipeline(env), runId: spec.runId, spec };
}

describe('several agent-tool calls in one turn', () => {
  it('start a child each with half of what is left, park once on both; a sleep beside them is a format error', async () => {
    const turn: ModelTurn = {
      toolCalls: [delegate('a'), { id: 'c-nap', name: 'nap', args: { ms: 1000 } }, delegate('b')],
      usage,
    };
    const s = setup([turn, done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(s.spec))));
    const left = s.spec.limits.maxTokens - (usage.promptTokens + usage.completionTokens);
    expect(s.children.started.map((r) => [r.parent.callId, r.limits.maxTokens, r.limits.maxSteps])).toEqual([
      ['c-a', Math.floor(left / 2), 4],
      ['c-b', Math.floor(left / 2), 4],
    ]);
    const run = s.w.store.run(s.runId);
    expect(run.state).toMatchObject({
      status: 'waiting_child',
      wait: {
        kind: 'child',
        step: 1,
        children: [
          { runId: 'r_' + '0'.repeat(23) + '1', callId: 'c-a', tool: 'delegate' },
          { runId: 'r_' + '0'.repeat(23) + '2', callId: 'c-b', tool: 'delegate' },
        ],
      },
    });
    expect(run.journal.filter((e) => e.kind === 'observation')).toEqual([
      expect.objectContaining({ callId: 'c-nap', status: 'format_error', output: { error: 'one_wait_per_step' } }),
    ]);
    expect(s.w.store.wakeJobs).toHaveLength(1);
  });

  it('the wake waits for every child, then journals each result in the order asked and charges them once', async () => {
    const s = setup([{ toolCalls: [delegate('a'), delegate('b')], usage }, done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(s.spec))));
    const [a, b] = [...s.children.outcomes.keys()];
    // The second child ended first; the first is still at work: the wake job waits for it.
    s.children.outcomes.set(b!, {
      ended: true,
      status: 'completed',
      reason: '',
      answer: 'b done',
      steps: 2,
      tokens: 40,
      actions: [],
    });
    const wake = s.w.store.wakeJobs[0]!;
    await expect(s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s2`, wake.data)))).rejects.toBeInstanceOf(
      DelayedError,
    );
    // Waiting on, it took nobody's outcome: the ended child may still be put back to work.
    expect(s.children.taken.size).toBe(0);
    s.children.outcomes.set(a!, {
      ended: true,
      status: 'failed',
      reason: 'step_error',
      steps: 1,
      tokens: 10,
      actions: [{ tool: 'refund', state: 'confirmed', actionId: 'a_1', receipt: 're_1' }],
    });
    s.w.clock.now = NOW + 10;
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s2`, wake.data)));
    const run = s.w.store.run(s.runId);
    expect(run.state.status).toBe('completed');
    // Both children marked as taken by this run before their outcomes were journalled.
    expect([...s.children.taken]).toEqual([
      [a, s.runId],
      [b, s.runId],
    ]);
    expect(run.journal.filter((e) => e.kind === 'observation')).toEqual([
      expect.objectContaining({
        callId: 'c-a',
        status: 'tool_error',
        output: {
          error: 'child_failed',
          childRunId: a,
          status: 'failed',
          reason: 'step_error',
          // What the child did before it stopped: the parent's model is told the refund was made.
          actions: [{ tool: 'refund', state: 'confirmed', actionId: 'a_1', receipt: 're_1' }],
        },
      }),
      expect.objectContaining({ callId: 'c-b', status: 'ok', output: { childRunId: b, answer: 'b done' } }),
    ]);
    // The run's two steps and two turns, and the children's 3 steps and 50 tokens, charged with the one wake.
    expect(run.state.used).toMatchObject({
      steps: 2 + 3,
      tokens: 2 * (usage.promptTokens + usage.completionTokens) + 50,
    });
    const woke = run.events.filter((e) => e.type === 'woke');
    expect(woke).toEqual([
      {
        type: 'woke',
        data: expect.objectContaining({
          kind: 'child',
          children: [
            { runId: a, status: 'failed' },
            { runId: b, status: 'completed' },
          ],
        }),
      },
    ]);
  });

  it('a child put back to work between the read and its mark: the wake waits on, nothing journalled', async () => {
    const s = setup([{ toolCalls: [delegate('a'), delegate('b')], usage }, done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(s.spec))));
    const [a, b] = [...s.children.outcomes.keys()];
    const ended = { ended: true, status: 'needs_human' as const, reason: 'model_outage', steps: 1, tokens: 5 };
    s.children.outcomes.set(a!, { ...ended, actions: [] });
    s.children.outcomes.set(b!, { ...ended, actions: [] });
    s.children.backToWorkAtTake = b;
    const wake = s.w.store.wakeJobs[0]!;
    await expect(s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s2`, wake.data)))).rejects.toBeInstanceOf(
      DelayedError,
    );
    const run = s.w.store.run(s.runId);
    expect(run.state.status).toBe('waiting_child');
    expect(run.journal.filter((e) => e.kind === 'observation')).toEqual([]);
    expect(s.children.taken.has(b!)).toBe(false);
  });
});
