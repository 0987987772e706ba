/**
 * A hand-off asked again (src/runs/children.ts, the parent's `handoffs`), on real Redis with a real worker and the
 * support agent's real `refund` tool against the sandbox's Stripe: a child makes its refund (confirmed) and stops on
 * its one-step budget; the parent's model is told the refund in the child's error (tool, ledger state, receipt) and
 * asking for the same hand-off again gets that child's answer again, `deduplicated`: one child, one refund. The same
 * hand-off twice in one turn waits on one child (a redelivery of that step included); an agent tool with
 * `identity: false` starts a child per call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { defineAgent, defineAgentTool } from '../../src/index.js';
import { createContext } from '../../src/server/buildContext.js';
import { createSupportTools } from '../../src/agents/support/tools/index.js';
import { childRunsOf } from '../../src/runs/children.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import type { ObservationEntry } from '../../src/core/journal.js';
import { CrashPoints } from '../../src/config/testHooks.js';
import { startScripted } from '../support/childRuns.js';

const usage = { promptTokens: 50, completionTokens: 10 };
const refundInput = z.object({
  orderId: z.string(),
  amountCents: z.number(),
  currency: z.string(),
  reason: z.string(),
});
type RefundInput = z.infer<typeof refundInput>;

let h: Harness;
let ctx: EngineContext;
/** Armed by a test: the next child start stops the step there, as a process dying would (a redelivery). */
let failNextChildStart = false;
const crash = new CrashPoints(['after_child_started'], () => {
  if (!failNextChildStart) return;
  failNextChildStart = false;
  throw new Error('stopped at after_child_started');
});
beforeAll(async () => {
  h = await createHarness('rehandoff', { COMPLETION_TOKEN_CAP: '100', MODEL_MAX_ATTEMPTS: '1' });
  const refund = createSupportTools({ baseUrl: h.sandbox.url }).find((t) => t.name === 'refund')!;
  const refunder = defineAgent<RefundInput>({
    name: 'refunder',
    version: 'refunder@1',
    input: refundInput.strict(),
    key: (i) => i.orderId,
    instructions: () => 'Refund.',
    prompt: (i) => `refund ${i.orderId}`,
    tools: [refund],
    demoScript: (i): unknown[] => [
      { toolCalls: [{ name: 'refund', args: i }], usage },
      { final: `refunded: ${i.orderId}`, usage },
    ],
  });
  const echo = defineAgent<{ q: string }>({
    name: 'echo',
    version: 'echo@1',
    input: z.object({ q: z.string() }).strict(),
    key: (i) => i.q,
    instructions: () => 'Answer.',
    prompt: (i) => i.q,
    tools: [],
    demoScript: (i): unknown[] => [{ final: `now: ${i.q}`, usage }],
  });
  const triage = defineAgent<{ id: string }>({
    name: 'triage',
    version: 'triage@1',
    input: z.object({ id: z.string() }).strict(),
    key: (i) => i.id,
    instructions: () => 'Delegate refunds.',
    prompt: (i) => `ticket ${i.id}`,
    tools: [
      defineAgentTool({
        name: 'hand_to_refunds',
        description: 'hands a refund to the refunds agent',
        args: refundInput,
        agent: 'refunder',
        input: (a) => a,
        budget: () => ({ maxSteps: 1 }), // a tight child budget: it stops right after its refund step
      }),
      defineAgentTool({
        name: 'refund_fully',
        description: 'hands a refund to the refunds agent, with room to answer',
        args: refundInput,
        agent: 'refunder',
        input: (a) => a,
      }),
      defineAgentTool({
        name: 'ask_echo',
        description: 'asks a read-only agent whose answer may change',
        args: z.object({ q: z.string() }),
        agent: 'echo',
        input: (a) => a,
        identity: false,
      }),
    ],
  });
  ctx = await createContext(h.cfg, 'rehandoff', { agents: [triage, refunder, echo] });
  await h.startWorker({ crash }, ctx);
});
afterAll(async () => h.close());

/** Runs the triage agent on a script to its end: its children and its observations. */
async function runTriage(turns: unknown[]) {
  const runId = await startScripted(ctx, 'triage', { id: `T-${Date.now()}-${Math.random()}` }, turns, { maxSteps: 10 });
  const status = await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human']);
  const children = await childRunsOf(ctx).childrenOf(runId);
  const observations = (await ctx.store.transcript(runId)).filter(
    (e): e is ObservationEntry => e.kind === 'observation',
  );
  return { runId, status, children, observations };
}

/** Refunds the sandbox's Stripe holds. */
const refunds = (): number => h.sandbox.counts().byResource.refunds?.records ?? 0;

describe('a hand-off asked again', () => {
  it('after its child refunded and stopped on its budget: the error names the refund, the repeat is answered from the child, one refund', async () => {
    const args = { orderId: 'pi_REHAND1', amountCents: 2500, currency: 'EUR', reason: 'broken mug' };
    const before = refunds();
    const call = { name: 'hand_to_refunds', args };
    const r = await runTriage([
      { toolCalls: [call], usage },
      { toolCalls: [call], usage },
      { final: 'done', usage },
    ]);
    expect(r.status).toBe('completed');
    expect(r.children).toHaveLength(1);
    const child = r.children[0]!;
    expect(await ctx.redis.hget(ctx.keys.run(child).run, 'status')).toBe('budget_exceeded');

    const [first, second] = r.observations;
    expect(first).toMatchObject({
      step: 1,
      status: 'tool_error',
      output: {
        error: 'child_budget_exceeded',
        childRunId: child,
        status: 'budget_exceeded',
        actions: [{ tool: 'refund', state: 'confirmed', receipt: expect.stringMatching(/^re_/) }],
      },
    });
    // The write tools' mark for a repeat answered from the ledger: nothing started, nothing sent.
    expect(second).toMatchObject({ step: 2, status: 'deduplicated', output: first!.output });
    expect(refunds() - before).toBe(1);
    expect(h.sandbox.counts().duplicates).toBe(0);
  });

  it('twice in one turn: one child, waited on by both calls, its answer ok then deduplicated, charged once', async () => {
    const args = { orderId: 'pi_REHAND2', amountCents: 1200, currency: 'EUR', reason: 'late' };
    const before = refunds();
    const call = { name: 'refund_fully', args };
    const r = await runTriage([
      { toolCalls: [call, call], usage },
      { final: 'done', usage },
    ]);
    expect(r.status).toBe('completed');
    expect(r.children).toHaveLength(1);
    const answer = { childRunId: r.children[0], answer: 'refunded: pi_REHAND2' };
    expect(r.observations.map((o) => [o.status, o.output])).toEqual([
      ['ok', answer],
      ['deduplicated', answer],
    ]);
    expect(refunds() - before).toBe(1);
    // The parent's own step plus the child's two, once (not twice for the repeat).
    expect(await ctx.redis.hget(ctx.keys.run(r.runId).budget, 'stepsUsed')).toBe(String(2 + 2));
  });

  it('twice in one turn, the step stopped after the child started: the redelivery keeps that child its own', async () => {
    const args = { orderId: 'pi_REHAND3', amountCents: 900, currency: 'EUR', reason: 'torn' };
    const before = refunds();
    failNextChildStart = true;
    const call = { name: 'refund_fully', args };
    const r = await runTriage([
      { toolCalls: [call, call], usage },
      { final: 'done', usage },
    ]);
    expect(failNextChildStart).toBe(false);
    expect(r.status).toBe('completed');
    expect(r.children).toHaveLength(1);
    // The child may have ended before the redelivery: the repeat is then answered at once, journalled before the
    // first call's result (the model gets them by call, in the order it asked).
    const byCall = [...r.observations].sort((a, b) => a.callId.localeCompare(b.callId));
    expect(byCall.map((o) => o.status)).toEqual(['ok', 'deduplicated']);
    expect(refunds() - before).toBe(1);
  });

  it('an agent tool with identity false starts a child per call', async () => {
    const call = { name: 'ask_echo', args: { q: 'time' } };
    const r = await runTriage([
      { toolCalls: [call], usage },
      { toolCalls: [call], usage },
      { final: 'done', usage },
    ]);
    expect(r.status).toBe('completed');
    expect(r.children).toHaveLength(2);
    expect(r.observations.map((o) => o.status)).toEqual(['ok', 'ok']);
  });
});
