/**
 * One action the reconciler's sweep cannot settle never stops the sweep of the others, nor the expiry of approvals:
 * an action whose run spec no longer parses goes to a person (`invalid_spec`), one whose settling throws is left open
 * for the next sweep; each is named (`sweep_action_failed`, ids and codes only) and counted
 * (`agent_sweep_action_failures_total`). Before, either one ended the whole sweep, every sweep, fleet-wide.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { approvalPolicy, expireApprovals } from '../../src/ledger/approvals.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { buildSpec } from '../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { dispatchedEmail, runIdsIn } from '../support/openActions.js';
import { final, refundCall, turn } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('sweepisolation', {
    APPROVAL_RULES: JSON.stringify([{ tool: 'refund', minAmountCents: 5000 }]),
    APPROVAL_TTL_MS: '1000',
    RECONCILER_MIN_AGE_MS: '0',
    RECONCILE_DEADLINE_MS: '2000',
    RECONCILE_POLL_MS: '20',
  });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

const failures = async (code: string, outcome: string) =>
  (await h.ctx.metrics.sweepActionFailures.get()).values.find(
    (v) => v.labels.code === code && v.labels.outcome === outcome,
  )?.value ?? 0;
const sweeps = async () => (await h.ctx.metrics.reconcilerSweeps.get()).values.reduce((n, v) => n + v.value, 0);

describe("the reconciler's sweep, one action at a time", () => {
  it('a spec that no longer parses and a settling that throws leave the healthy action and the approvals swept', async () => {
    // A run parked for an approval that expires in a second.
    const worker = await h.startWorker({
      effects: createEffectRunner(h.ctx, { approvals: approvalPolicy(h.cfg.APPROVAL_RULES) }),
    });
    const parked = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket(`SI-A-${Date.now()}`),
        agent: { model: 'scripted', script: [turn([refundCall(9_000)]), final] },
      },
      Date.now(),
    );
    await h.ctx.store.create(parked, Date.now());
    expect(await h.waitForStatus(parked.runId, ['waiting_approval', 'failed', 'completed'])).toBe('waiting_approval');
    await worker.stop();

    // A run waiting for a worker (none runs): its dispatched email has no live owner.
    const healthy = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket(`SI-H-${Date.now()}`), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await h.ctx.store.create(healthy, Date.now());
    const shard = h.ctx.keys.shardOf(healthy.runId);
    // Ahead of it in its shard's index: an action whose run spec no longer parses, and one whose spec read throws.
    const poisoned = runIdsIn(h, shard, `r_poisoned_${Date.now()}`, 1)[0]!;
    await h.ctx.redis.hset(h.ctx.keys.run(poisoned).run, { status: 'failed', spec: '{"v":1}' });
    const poisonedAction = await dispatchedEmail(h, ledger, poisoned, 'poisoned@example.com');
    const throwing = runIdsIn(h, shard, `r_throwing_${Date.now()}`, 1)[0]!;
    const throwingAction = await dispatchedEmail(h, ledger, throwing, 'throwing@example.com');
    await new Promise((res) => setTimeout(res, 5));
    const healthyAction = await dispatchedEmail(h, ledger, healthy.runId, 'ada@example.com');
    const order = await h.ctx.redis.zrange(h.ctx.keys.openActions(shard), 0, -1);
    expect(order.indexOf(poisonedAction)).toBeLessThan(order.indexOf(healthyAction));
    expect(order.indexOf(throwingAction)).toBeLessThan(order.indexOf(healthyAction));

    const readSpec = h.ctx.store.readSpec.bind(h.ctx.store);
    const specRead = vi.spyOn(h.ctx.store, 'readSpec').mockImplementation(async (runId: string) => {
      if (runId === throwing) throw new Error('ERR connection reset while reading the spec of ada@example.com');
      return readSpec(runId);
    });
    const error = vi.spyOn(h.ctx.log, 'error');
    const expiresAt = (await ledger.listForRun(parked.runId))[0]?.approvalExpiresAt ?? 0;
    await until('the approval expired', 5_000, () => Date.now() > expiresAt + 10);

    const r = new Reconciler(h.ctx, 'reconciler:isolation');
    try {
      const before = await sweeps();
      r.start();
      await until('one sweep ended', 15_000, async () => (await sweeps()) > before);
    } finally {
      await r.stop();
      specRead.mockRestore();
    }

    expect((await ledger.get(healthy.runId, healthyAction))?.state).toBe('confirmed');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parked.runId).run, 'status')).toBe('failed');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parked.runId).run, 'reason')).toBe('approval_expired');
    const person = await ledger.get(poisoned, poisonedAction);
    expect(person?.state).toBe('needs_human');
    expect((await ledger.history(poisoned, poisonedAction)).at(-1)?.why).toMatch(/^invalid_spec/);
    expect((await ledger.get(throwing, throwingAction))?.state).toBe('dispatched');
    expect(await failures('invalid_spec', 'needs_human')).toBe(1);
    expect(await failures('Error', 'left_open')).toBe(1);
    const logged = error.mock.calls
      .map(([fields]) => fields as Record<string, unknown>)
      .filter((f) => f.code === 'sweep_action_failed');
    error.mockRestore();
    expect(logged).toEqual(
      expect.arrayContaining([
        { code: 'sweep_action_failed', actionId: poisonedAction, error: 'invalid_spec', outcome: 'needs_human' },
        { code: 'sweep_action_failed', actionId: throwingAction, error: 'Error', outcome: 'left_open' },
      ]),
    );
    // Ids and codes only: the error's text (here, an address) is never logged.
    expect(JSON.stringify(logged)).not.toContain('ada@example.com');
  });
});

describe('the approvals pass, one approval at a time', () => {
  it('an approval it cannot settle is named, counted and paged past: the ones behind it expire', async () => {
    const worker = await h.startWorker({
      effects: createEffectRunner(h.ctx, { approvals: approvalPolicy(h.cfg.APPROVAL_RULES) }),
    });
    const park = async (id: string) => {
      const spec = buildSpec(
        h.ctx,
        {
          tenant: 'acme',
          ticket: sampleTicket(`${id}-${Date.now()}`),
          agent: { model: 'scripted', script: [turn([refundCall(9_000)]), final] },
        },
        Date.now(),
      );
      await h.ctx.store.create(spec, Date.now());
      expect(await h.waitForStatus(spec.runId, ['waiting_approval', 'failed', 'completed'])).toBe('waiting_approval');
      return { runId: spec.runId, actionId: (await ledger.listForRun(spec.runId))[0]!.actionId };
    };
    const first = await park('SI-AP-1');
    await new Promise((res) => setTimeout(res, 5));
    const second = await park('SI-AP-2');
    await worker.stop();
    // The first run's hash is no hash any more: stopping it fails (WRONGTYPE), whatever the pass does.
    const k = h.ctx.keys.run(first.runId).run;
    await h.ctx.redis.del(k);
    await h.ctx.redis.set(k, 'not a hash');
    const error = vi.spyOn(h.ctx.log, 'error');
    const before = await failures('ReplyError', 'left_open');

    // A page of one: without paging past the first, the second would never be read.
    const now = Date.now() + 10 * h.cfg.APPROVAL_TTL_MS;
    expect(await expireApprovals(h.ctx, now, 1)).toEqual([second.actionId]);

    expect(await h.ctx.redis.hget(h.ctx.keys.run(second.runId).run, 'reason')).toBe('approval_expired');
    const index = await h.ctx.redis.zrange(h.ctx.keys.approvals(h.ctx.keys.shardOf(first.runId)), 0, -1);
    expect(index).toContain(first.actionId);
    expect(index).not.toContain(second.actionId);
    expect(await failures('ReplyError', 'left_open')).toBe(before + 1);
    const logged = error.mock.calls
      .map(([fields]) => fields as Record<string, unknown>)
      .filter((f) => f.code === 'approval_expiry_failed');
    error.mockRestore();
    expect(logged).toEqual([{ code: 'approval_expiry_failed', actionId: first.actionId, error: 'ReplyError' }]);
  });
});
