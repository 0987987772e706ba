/**
 * A step's writes follow the decision the store holds (includes/journalledDecision.lua), on real Redis: the step's
 * journalled decision must be that very entry (its sha1), not merely some decision of the step. The failover that
 * makes the difference is test/e2e/failover/lostDecision.test.ts; here each case apart:
 * - an action's plan (ledgerPlan-7.lua): refused when the decision is missing (a failover took it back), when the
 *   step has another one (a later delivery asked the model again), or when the entry at the decision index is
 *   another; planned when the journal holds it; an operator's compensation (no step decided it) is not fenced;
 * - a step's commit (commitStep-23.lua): a delivery whose journalled decision is taken back before its commit
 *   appends no observation without it (the model would be asked that turn again).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createHarness, type Harness, supportTool, sampleTicket } from '../../testkit/harness.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { encodeEntry, entryDigest, type DecisionEntry } from '../../src/core/journal.js';
import { FenceError } from '../../src/core/errors.js';
import type { WriteTool } from '../../src/core/tool.js';
import { Worker } from 'bullmq';
import { buildSpec } from '../../src/producer/intake.js';
import { StepProcessor } from '../../src/worker/step/processor.js';
import { RunSpecCache } from '../../src/runs/store.js';
import { CrashPoints } from '../../src/config/testHooks.js';
import { read, final } from '../../testkit/turns.js';

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

describe("a step's commit follows the decision the store holds", () => {
  it('a decision taken back after it was journalled: the commit appends no observation without it', async () => {
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('T-taken'), agent: { model: 'scripted', script: [read, final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const k = h.ctx.keys.run(spec.runId);
    const manual = new Worker(h.ctx.queues.forRun(spec.runId).name, null, {
      connection: h.ctx.redis,
      prefix: h.ctx.keys.bullPrefix,
      lockDuration: 60_000,
    });
    // Right after the decision is journalled, the store loses it, as a promoted replica that never had it would:
    // sent on the same connection, so it lands before any later write of the step.
    const takeBack = () => void h.ctx.redis.multi().rpop(k.journal).hdel(k.run, 'decidedStep', 'decisionIndex').exec();
    const processor = new StepProcessor({
      cfg: h.cfg,
      redis: h.ctx.redis,
      keys: h.ctx.keys,
      store: h.ctx.store,
      specs: new RunSpecCache(h.ctx.store),
      agents: h.ctx.agents,
      providers: h.ctx.providers,
      metrics: h.ctx.metrics,
      log: h.ctx.log,
      crash: new CrashPoints(['after_decision@1'], takeBack),
    });
    try {
      const job = await manual.getNextJob('token-A');
      // A redelivery journals even a read step's decision at once.
      job.attemptsStarted = 2;
      const err = await processor.process(job, 'token-A', new AbortController().signal).catch((e: unknown) => e);
      expect((err as FenceError).code).toBe('decision_not_journalled');
      expect(await h.ctx.store.transcript(spec.runId)).toEqual([]);
      expect((await h.ctx.store.readState(spec.runId))?.cursor).toBe(1);
    } finally {
      await manual.close();
    }
  });
});
