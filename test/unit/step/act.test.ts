/** The act stage without Redis: tool calls in order, format errors for the model, the ledger's parks, the deadline. */
import { describe, expect, it } from 'vitest';
import type { DecisionEntry } from '../../../src/core/journal.js';
import { act } from '../../../src/worker/step/act.js';
import { MemoryJob } from './memoryStepStore.js';
import { agent, jobData, specOf, stateOf, usage, world, type World } from './fixtures.js';

function decision(...calls: { name: string; args: unknown }[]): DecisionEntry {
  return {
    v: 1,
    kind: 'decision',
    step: 1,
    model: 'queued',
    toolCalls: calls.map((c, i) => ({ id: `c${i}`, ...c })),
    usage,
    attempts: 1,
  };
}

function run(w: World, d: DecisionEntry, carriesDecision = false) {
  const spec = specOf();
  // A decision not carried by the commit was journalled before the tools ran.
  if (!carriesDecision) w.store.addRun(spec).state.decidedStep = 1;
  const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec)), { decision: d, carriesDecision });
  return act(w.env, state, agent, d);
}

describe('act', () => {
  it('runs the calls in order: a read, an unknown tool and bad arguments become observations the model sees', async () => {
    const w = world();
    const d = decision(
      { name: 'read_note', args: { id: 'a' } },
      { name: 'nope', args: {} },
      { name: 'read_note', args: { id: 1 } },
    );
    const plan = await run(w, d, true);
    expect(plan.entries.map((e) => (e.kind === 'observation' ? `${e.tool}:${e.status}` : e.kind))).toEqual([
      'decision',
      'read_note:ok',
      'nope:format_error',
      'read_note:format_error',
    ]);
    expect(plan).toMatchObject({
      status: 'running',
      stepsDelta: 1,
      tokensDelta: 12,
      advance: true,
      carriesDecision: true,
    });
  });

  it('a write goes through the ledger and is observed with its action id; a journalled decision is not carried again', async () => {
    const w = world();
    const plan = await run(w, decision({ name: 'send_note', args: { to: 'x' } }));
    expect(plan.entries).toHaveLength(1);
    expect(plan.entries[0]).toMatchObject({ kind: 'observation', status: 'ok', actionId: 'a1' });
    expect(plan.tokensDelta).toBe(0);
  });

  it('a write whose arguments the tool refuses is answered by the action the call planned before, else a format error', async () => {
    const planned = { kind: 'observed', status: 'ok', output: { sent: 'before' }, actionId: 'a-planned' } as const;
    const before = await run(world({ resumed: planned }), decision({ name: 'send_note', args: { to: 7 } }));
    expect(before.entries).toEqual([
      expect.objectContaining({ status: 'ok', actionId: 'a-planned', output: { sent: 'before' } }),
    ]);
    const none = await run(world(), decision({ name: 'send_note', args: { to: 7 } }));
    expect(none.entries).toEqual([
      expect.objectContaining({
        status: 'format_error',
        output: expect.objectContaining({ error: 'invalid_arguments' }),
      }),
    ]);
  });

  it('a call to a tool that is gone is answered with what the write it planned came to, else as an unknown tool', async () => {
    const settled = { kind: 'observed', status: 'rejected', output: { rejected: true }, actionId: 'a-gone' } as const;
    const gone = await run(world({ settled }), decision({ name: 'old_send', args: { to: 'x' } }));
    expect(gone.entries).toEqual([
      expect.objectContaining({ tool: 'old_send', status: 'rejected', actionId: 'a-gone' }),
    ]);
    const never = await run(world(), decision({ name: 'old_send', args: { to: 'x' } }));
    expect(never.entries).toEqual([
      expect.objectContaining({ status: 'format_error', output: { error: 'unknown_tool', tool: 'old_send' } }),
    ]);
  });

  it('a write that needs approval parks the run at this step, recording which action the approval is for', async () => {
    const w = world({
      effects: [{ kind: 'park', status: 'waiting_approval', reason: 'approval_required', actionId: 'act-7' }],
    });
    const plan = await run(
      w,
      decision({ name: 'read_note', args: { id: 'a' } }, { name: 'send_note', args: { to: 'x' } }),
    );
    expect(plan).toMatchObject({ status: 'waiting_approval', advance: false, stepsDelta: 0, approvalFor: 'act-7' });
    // Two calls ran at once: the read's observation was journalled when it finished, the park commits the status.
    expect(plan.entries.map((e) => e.kind)).toEqual(['status']);
    expect(w.store.run(specOf().runId).journal.map((e) => e.kind)).toEqual(['observation']);
  });

  it('no tool starts past the deadline: the step commits budget_exceeded (wall_clock) with what ran', async () => {
    const w = world();
    w.clock.now = specOf().limits.deadlineAt;
    const plan = await run(w, decision({ name: 'read_note', args: { id: 'a' } }));
    expect(plan.status).toBe('budget_exceeded');
    expect(plan.reason).toMatch(/^wall_clock/);
    expect(plan.entries.map((e) => e.kind)).toEqual(['status']);
  });

  it('a final answer completes the run', async () => {
    const w = world();
    const final: DecisionEntry = { ...decision(), final: 'done' };
    const plan = await run(w, final, true);
    expect(plan.status).toBe('completed');
    expect(plan.entries.map((e) => e.kind)).toEqual(['decision', 'status']);
  });
});
