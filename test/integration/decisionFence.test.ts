/**
 * An action is planned only where the run's journal holds the decision that asked for it (ledgerPlan-7.lua with
 * includes/journalledDecision.lua), on real Redis: the step's journalled decision is that very entry (its sha1), not
 * merely some decision of the step. The failover that makes the difference is test/e2e/failover/lostDecision.test.ts;
 * here each case the script tells apart, one by one: the decision missing (a failover took it back), another
 * decision of the step (a later delivery asked the model again), the step not decided, the decision held, and an
 * operator's compensation (no step decided it: not fenced).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createHarness, type Harness, supportTool } from '../../testkit/harness.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { encodeEntry, entryDigest, type DecisionEntry } from '../../src/core/journal.js';
import { FenceError } from '../../src/core/errors.js';
import type { WriteTool } from '../../src/core/tool.js';

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('decisionfence');
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

const args = { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'T' };
const decision = (subject: string): string =>
  encodeEntry({
    v: 1,
    kind: 'decision',
    step: 2,
    model: 'm',
    toolCalls: [{ id: 'c1', name: 'create_ticket', args: { ...args, subject } }],
    usage: { promptTokens: 1, completionTokens: 1 },
    attempts: 1,
  } satisfies DecisionEntry);

/** A run whose journal is `entries`, its step-2 decision (when `decidedStep` is 2) the last one. */
async function runWith(entries: string[], decidedStep?: number): Promise<string> {
  const runId = `r_${randomBytes(6).toString('hex')}`;
  const k = h.ctx.keys.run(runId);
  if (entries.length > 0) await h.ctx.redis.rpush(k.journal, ...entries);
  await h.ctx.redis.hset(k.run, {
    status: 'running',
    cursor: '2',
    ...(decidedStep !== undefined
      ? { decidedStep: String(decidedStep), decisionIndex: String(entries.length - 1) }
      : {}),
  });
  return runId;
}

async function plan(runId: string, digest: string | undefined) {
  const tool = supportTool(h.ctx, 'create_ticket') as WriteTool;
  const id = actionIdentity(runId, tool, args);
  const planned = ledger.plan(runId, 2, 'c1', tool.name, id, args, 'test', digest);
  return { planned, record: () => ledger.get(runId, id.actionId) };
}

async function refused(runId: string, digest: string): Promise<void> {
  const p = await plan(runId, digest);
  const err = await p.planned.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FenceError);
  expect((err as FenceError).code).toBe('decision_not_journalled');
  expect(await p.record()).toBeUndefined();
}

describe('an action is planned only where the journal holds its decision', () => {
  const first = decision('delivery');
  const second = decision('damage');

  it('refused when the decision is gone (the step has none)', async () => {
    await refused(await runWith(['{"v":1}'], 1), entryDigest(first));
  });

  it('refused when the step has another decision', async () => {
    await refused(await runWith(['{"v":1}', second], 2), entryDigest(first));
  });

  it('refused when the entry at the decision index is not the decision', async () => {
    await refused(await runWith([first, second], 2), entryDigest(first));
  });

  it('planned when the journal holds the very decision', async () => {
    const p = await plan(await runWith(['{"v":1}', first], 2), entryDigest(first));
    expect((await p.planned).status).toBe('new');
    expect((await p.record())?.state).toBe('planned');
  });

  it('an action no step decided (a compensation) is not fenced', async () => {
    const p = await plan(await runWith([]), undefined);
    expect((await p.planned).status).toBe('new');
  });
});
