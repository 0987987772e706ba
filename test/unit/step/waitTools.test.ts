/**
 * Wait tools without Redis: a sleep parks the run `sleeping` with a wake job due at its time, counts against the
 * wall clock, wakes only when due; a wait for an event parks `waiting_event` and resumes with the delivery, or
 * with a timeout result, or at once with a delivery kept for the key.
 */
import { DelayedError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, defineWaitTool, type Agent } from '../../../src/core/agent.js';
import type { ModelTurn } from '../../../src/core/model.js';
import type { StepEnv } from '../../../src/worker/step/env.js';
import { StepPipeline } from '../../../src/worker/step/pipeline.js';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, jobData, NOW, specOf, usage, world, type World } from './fixtures.js';

const agent: Agent = defineAgent({
  name: 'echo',
  version: 'echo@1',
  input: z.object({ text: z.string() }),
  instructions: () => 'Echo.',
  tools: [
    defineWaitTool({
      name: 'nap',
      description: 'sleeps',
      args: z.object({ ms: z.number() }),
      wait: ({ ms }) => ({ kind: 'sleep', forMs: ms }),
    }),
    defineWaitTool({
      name: 'await_reply',
      description: 'waits for a reply',
      args: z.object({ key: z.string(), ms: z.number() }),
      wait: ({ key, ms }) => ({ kind: 'event', key, timeoutMs: ms }),
    }),
  ],
});

const call = (name: string, args: unknown): ModelTurn => ({ toolCalls: [{ id: `c-${name}`, name, args }], usage });
const done: ModelTurn = { toolCalls: [], final: 'done', usage };

function setup(turns: ModelTurn[]): { w: World; pipeline: StepPipeline; runId: string } {
  const w = world({ turns });
  const env: StepEnv = { ...w.env, agents: { ...w.env.agents, agentFor: () => agent } };
  const spec = specOf({ toolsHash: agent.tools.schemaHash });
  w.store.addRun(spec);
  return { w, pipeline: new StepPipeline(env), runId: spec.runId };
}

/** The wake job the park asked for, delivered as BullMQ would at its time. */
async function deliverWake(s: ReturnType<typeof setup>): Promise<MemoryJob> {
  const wake = s.w.store.wakeJobs.at(-1)!;
  const job = new MemoryJob(`${s.runId}.s${wake.data.step}`, wake.data);
  await s.pipeline.run(delivery(job));
  return job;
}

describe('sleep', () => {
  it('parks the run sleeping, its wait recorded, a wake job due at its time; the result is journalled', async () => {
    const s = setup([call('nap', { ms: 5000 }), done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    const run = s.w.store.run(s.runId);
    expect(run.state).toMatchObject({ status: 'sleeping', cursor: 2, wait: { kind: 'sleep', at: NOW + 5000 } });
    expect(run.state.reason).toBe(`sleep until ${new Date(NOW + 5000).toISOString()}`);
    expect(s.w.store.wakeJobs).toEqual([{ data: expect.objectContaining({ step: 2, wake: true }), atMs: NOW + 5000 }]);
    expect(run.journal.find((e) => e.kind === 'observation')).toMatchObject({
      tool: 'nap',
      output: { sleptUntil: new Date(NOW + 5000).toISOString() },
    });
  });

  it('a wake job early is delayed to the wait; when due, the run runs again and the model is asked', async () => {
    const s = setup([call('nap', { ms: 5000 }), done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    await expect(deliverWake(s)).rejects.toBeInstanceOf(DelayedError);
    expect(s.w.model.requests).toHaveLength(1);
    s.w.clock.now = NOW + 5000;
    await deliverWake(s);
    expect(s.w.store.run(s.runId).state.status).toBe('completed');
    expect(s.w.model.requests).toHaveLength(2);
    expect(s.w.store.run(s.runId).events.some((e) => e.type === 'woke')).toBe(true);
  });

  it('counts against the wall clock: a sleep past the deadline ends the run budget_exceeded at once', async () => {
    const s = setup([call('nap', { ms: 120_000 })]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    const run = s.w.store.run(s.runId);
    expect(run.state.status).toBe('budget_exceeded');
    expect(run.state.reason).toMatch(/^wall_clock: a sleep until .* ends past the deadline/);
    expect(s.w.store.wakeJobs).toEqual([]);
  });
});

describe('wait for an event', () => {
  it('parks waiting_event; a delivery resumes it with the payload as the call result', async () => {
    const s = setup([call('await_reply', { key: 'reply:1', ms: 10_000 }), done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    expect(s.w.store.run(s.runId).state).toMatchObject({ status: 'waiting_event', wait: { kind: 'event' } });
    // What deliverEvent-1.lua does for the waiting key.
    const e = s.w.store.eventKeys.get('acme/reply:1')!;
    Object.assign(e, { state: 'delivered', payload: JSON.stringify({ text: 'yes' }) });
    await deliverWake(s);
    const run = s.w.store.run(s.runId);
    expect(run.state.status).toBe('completed');
    expect(run.journal.filter((x) => x.kind === 'observation')).toEqual([
      expect.objectContaining({ step: 1, callId: 'c-await_reply', output: { event: { text: 'yes' } } }),
    ]);
  });

  it('the timeout resumes it with a timeout result; before the timeout, with nothing delivered, the job waits', async () => {
    const s = setup([call('await_reply', { key: 'reply:2', ms: 10_000 }), done]);
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    await expect(deliverWake(s)).rejects.toBeInstanceOf(DelayedError);
    s.w.clock.now = NOW + 10_000;
    await deliverWake(s);
    const obs = s.w.store.run(s.runId).journal.filter((x) => x.kind === 'observation');
    expect(obs).toEqual([expect.objectContaining({ output: { timedOut: true } })]);
  });

  it('a delivery kept before the wait answers it at once: no park', async () => {
    const s = setup([call('await_reply', { key: 'reply:3', ms: 10_000 }), done]);
    s.w.store.eventKeys.set('acme/reply:3', { state: 'pending', payload: '"early"' });
    await s.pipeline.run(delivery(new MemoryJob(`${s.runId}.s1`, jobData(specOf()))));
    const run = s.w.store.run(s.runId);
    expect(run.state.status).toBe('running');
    expect(run.journal.find((x) => x.kind === 'observation')).toMatchObject({ output: { event: 'early' } });
  });
});
