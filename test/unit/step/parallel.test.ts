/**
 * Parallel tool calls without Redis: the calls of one turn run at once, a `runsAlone` write by itself, the
 * observations in the order the model asked, and a kill mid-step redoes none of the calls already journalled.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, defineReadTool, defineWriteTool, type Agent } from '../../../src/core/agent.js';
import type { DecisionEntry } from '../../../src/core/journal.js';
import { CrashPoints } from '../../../src/config/testHooks.js';
import type { EffectRunner } from '../../../src/worker/effects.js';
import type { StepEnv } from '../../../src/worker/step/env.js';
import { act } from '../../../src/worker/step/act.js';
import { StepPipeline } from '../../../src/worker/step/pipeline.js';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, jobData, specOf, stateOf, usage, world, type World } from './fixtures.js';

/**
 * What ran, when: `start:<id>` and `end:<id>` in the order they happened. The first call of a `held` id ends
 * only when the test releases it, every other call at once: the order calls finish in is the test's, not a clock's.
 */
function timeline(...held: string[]) {
  const openers = new Map<string, () => void>();
  const holds = new Map(held.map((id) => [id, new Promise<void>((r) => openers.set(id, r))]));
  const finish = async (id: string) => {
    const hold = holds.get(id);
    holds.delete(id);
    await hold;
  };
  const release = (...ids: string[]) => ids.forEach((id) => openers.get(id)!());
  const events: string[] = [];
  const waiters = new Map<string, () => void>();
  const note = (event: string) => (events.push(event), waiters.get(event)?.());
  /** Resolves once `event` has happened. */
  const reached = (event: string) =>
    events.includes(event) ? Promise.resolve() : new Promise<void>((r) => waiters.set(event, r));
  const reads: Record<string, number> = {};
  const slowRead = defineReadTool({
    name: 'slow_read',
    description: 'reads slowly',
    args: z.object({ id: z.string() }),
    execute: async ({ id }) => {
      reads[id] = (reads[id] ?? 0) + 1;
      note(`start:${id}`);
      await finish(id);
      note(`end:${id}`);
      return { id };
    },
  });
  const write = (name: string, runsAlone: boolean) =>
    defineWriteTool({
      name,
      description: 'writes',
      args: z.object({ id: z.string() }),
      service: { enforcesKey: true, reconcile: 'none' },
      runsAlone,
      dispatch: async () => ({ receipt: 'r', output: {}, replayed: false }),
    });
  const agent: Agent = defineAgent({
    name: 'echo',
    version: 'echo@1',
    input: z.object({ text: z.string() }),
    instructions: () => 'Echo.',
    tools: [slowRead, write('send', false), write('send_alone', true)],
  });
  const sent: Record<string, number> = {};
  const effects: EffectRunner = {
    run: async ({ call, args }) => {
      const { id } = args as { id: string };
      sent[id] = (sent[id] ?? 0) + 1;
      note(`start:${id}`);
      await finish(id);
      note(`end:${id}`);
      return { kind: 'observed', status: 'ok', output: { id }, actionId: `a_${call.id}` };
    },
  };
  return { events, reads, sent, agent, effects, release, reached };
}

/** The store here is in memory: what a delivery does without a held call has run by the next immediate. */
const settled = () => new Promise((r) => setImmediate(r));

function decision(...calls: [name: string, id: string][]): DecisionEntry {
  return {
    v: 1,
    kind: 'decision',
    step: 1,
    model: 'queued',
    toolCalls: calls.map(([name, id]) => ({ id: `c_${id}`, name, args: { id } })),
    usage,
    attempts: 1,
  };
}

function withAgent(w: World, t: ReturnType<typeof timeline>): StepEnv {
  const env: StepEnv = {
    ...w.env,
    effects: t.effects,
    agents: { ...w.env.agents, agentFor: () => t.agent },
  };
  return env;
}

describe('parallel tool calls (act)', () => {
  it('three reads of one turn run at once: all three start before any ends', async () => {
    const w = world();
    const t = timeline('a', 'b', 'c');
    const spec = specOf({ toolsHash: t.agent.tools.schemaHash });
    const d = decision(['slow_read', 'a'], ['slow_read', 'b'], ['slow_read', 'c']);
    const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec)), {
      decision: d,
      carriesDecision: true,
    });
    const acting = act(withAgent(w, t), state, t.agent, d);
    // None can end before the test releases it: calls run one after another would never all start.
    await t.reached('start:c');
    expect(t.events).toEqual(['start:a', 'start:b', 'start:c']);
    t.release('a', 'b', 'c');
    const plan = await acting;
    expect(plan.status).toBe('running');
  });

  it("results keep the model's order however the calls finish", async () => {
    const w = world();
    const t = timeline('slow', 'w', 'fast');
    const spec = specOf({ toolsHash: t.agent.tools.schemaHash });
    const d = decision(['slow_read', 'slow'], ['send', 'w'], ['slow_read', 'fast']);
    const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec)), {
      decision: d,
      carriesDecision: true,
    });
    const acting = act(withAgent(w, t), state, t.agent, d);
    await t.reached('start:fast');
    t.release('fast');
    await t.reached('end:fast');
    t.release('w');
    await t.reached('end:w');
    t.release('slow');
    const plan = await acting;
    expect(t.events.filter((e) => e.startsWith('end:'))).toEqual(['end:fast', 'end:w', 'end:slow']);
    expect(plan.entries.map((e) => (e.kind === 'observation' ? e.callId : e.kind))).toEqual([
      'decision',
      'c_slow',
      'c_w',
      'c_fast',
    ]);
  });

  it('writes run at once, each its own ledger action; a runsAlone write waits for the calls before it', async () => {
    const w = world();
    const t = timeline('w1', 'w2', 'solo');
    const spec = specOf({ toolsHash: t.agent.tools.schemaHash });
    const d = decision(['send', 'w1'], ['send', 'w2'], ['send_alone', 'solo'], ['slow_read', 'r']);
    w.store.addRun(spec).state.decidedStep = 1;
    const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec)), { decision: d });
    const acting = act(withAgent(w, t), state, t.agent, d);
    await t.reached('start:w2');
    t.release('w1');
    // Everything w1's end leads to has run: its observation journalled, and solo not started while w2 is held.
    await settled();
    expect(w.store.run(spec.runId).journal).toHaveLength(1);
    expect(t.events).toEqual(['start:w1', 'start:w2', 'end:w1']);
    t.release('w2');
    await t.reached('start:solo');
    // The read after solo waits for it as the writes before it did.
    expect(t.events.at(-1)).toBe('start:solo');
    t.release('solo');
    const plan = await acting;
    expect(t.events).toEqual([
      'start:w1',
      'start:w2',
      'end:w1',
      'end:w2',
      'start:solo',
      'end:solo',
      'start:r',
      'end:r',
    ]);
    // The decision is journalled (writes follow): each observation was journalled as its call finished.
    expect(plan.entries).toEqual([]);
    const journal = w.store.run(spec.runId).journal;
    expect(journal.map((e) => (e.kind === 'observation' ? (e.actionId ?? e.callId) : e.kind))).toEqual([
      'a_c_w1',
      'a_c_w2',
      'a_c_solo',
      'c_r',
    ]);
  });
});

describe('parallel tool calls (a kill mid-step)', () => {
  it('the next delivery runs only the calls not journalled; the commit holds each observation once, in order', async () => {
    const w = world();
    const t = timeline('w2');
    const spec = specOf({ toolsHash: t.agent.tools.schemaHash });
    const turn = decision(['send', 'w1'], ['slow_read', 'r'], ['send', 'w2']);
    w.model.turns.push({ toolCalls: turn.toolCalls, usage }, { toolCalls: [], final: 'done', usage });
    w.store.addRun(spec);
    // The first delivery dies after the first observation is journalled (w2 still in flight).
    let killed = 0;
    const dying: StepEnv = {
      ...withAgent(w, t),
      crash: new CrashPoints(['after_observation'], () => {
        if (killed++ === 0) throw new Error('killed');
      }),
    };
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec));
    const dies = expect(new StepPipeline(dying).run(delivery(job))).rejects.toThrow('killed');
    await t.reached('end:r');
    await settled();
    expect(killed).toBeGreaterThan(0);
    t.release('w2');
    await dies;
    const journalled = w.store.run(spec.runId).journal.filter((e) => e.kind === 'observation');
    expect(journalled.length).toBeGreaterThanOrEqual(1);
    // Redelivered (attempt 2): the decision is reused, only the calls with no journalled observation run.
    const again = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 2, 1);
    await new StepPipeline(withAgent(w, t)).run(delivery(again));
    const run = w.store.run(spec.runId);
    expect(w.model.requests).toHaveLength(1);
    for (const o of journalled) {
      const id = (o as { callId: string }).callId.slice(2);
      expect({ id, runs: (t.sent[id] ?? 0) + (t.reads[id] ?? 0) }).toEqual({ id, runs: 1 });
    }
    const obs = run.journal.filter((e) => e.kind === 'observation').map((e) => (e as { callId: string }).callId);
    expect([...obs].sort()).toEqual(['c_r', 'c_w1', 'c_w2']);
    expect(run.state).toMatchObject({ status: 'running', cursor: 2 });
  });
});
