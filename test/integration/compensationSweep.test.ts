/**
 * A compensation that does not finish is not left stuck: its original stays in the human queue
 * (compensation_required) until the compensation has ended the run, the POST says when it is not sent, and the
 * reconciler's sweep sends it with its key and ends the run. One an earlier release left out of the queue is put
 * back by the reconciler (CompensationRequeue) and finished the same way.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { compensationCall } from '../../src/ledger/compensation.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import type { WriteTool } from '../../src/core/tool.js';
import type { Harness } from '../../testkit/harness.js';
import { captureLines } from '../support/logCapture.js';
import { call, email, final, operatorHarness, startScripted, turn } from './operators/support.js';

type Item = ActionRecord & { history: HistoryEntry[] };

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('compsweep', {
    RECONCILE_DEADLINE_MS: '500',
    RECONCILE_POLL_MS: '20',
    RETRY_BASE_MS: '5',
    RETRY_MAX_MS: '10',
    RECONCILER_MIN_AGE_MS: '0',
  });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

const queue = async () =>
  (await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations')).body.reconciliations;
const sweep = () => new Reconciler(h.ctx, 'reconciler:compsweep').sweep();
const unsettled = async () =>
  ((await h.ctx.metrics.registry.getSingleMetric('agent_compensations_unsettled_total')?.get())?.values ?? []).reduce(
    (n, v) => n + v.value,
    0,
  );

/** An email whose answer was lost at a service with no lookup: the run parks needs_human with it in the queue. */
async function parkedEmail(): Promise<{ runId: string; item: Item }> {
  h.sandbox.setFaults([
    { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
    { kind: 'no_lookup', resource: 'emails' },
  ]);
  const runId = await startScripted(h, [turn([email]), final], 'CSW');
  expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
  const item = (await queue()).find((x) => x.runId === runId);
  expect(item?.state).toBe('needs_human');
  h.sandbox.clearFaults();
  return { runId, item: item! };
}

/** What compensate() writes before it drives the compensation: planned, and linked both ways. */
async function linkCompensation(runId: string, item: Item): Promise<ActionRecord> {
  const spec = (await h.ctx.store.readSpec(runId))!;
  const { tool, args } = compensationCall(item, spec, h.ctx.agents.get(spec.agent));
  const comp = await ledger.planCompensation(item, tool.name, args, 'olga', {});
  await ledger.transition(
    runId,
    item.actionId,
    'needs_human',
    'compensation_required',
    { by: 'olga', why: 'operator finding: compensate' },
    { compensatedBy: comp.actionId },
  );
  return comp;
}

describe('a compensation that does not finish', () => {
  it('refused with 429s: the POST says it is not sent, the item stays queued, one sweep sends it and ends the run', async () => {
    const { runId, item } = await parkedEmail();
    const before = await unsettled();
    h.sandbox.setFaults([{ kind: 'rate_limit', resource: 'emails', retryAfterS: 0 }]);
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'compensate',
      evidence: { note: 'wrong template' },
    });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      state: 'compensation_required',
      compensationState: 'safe_retry',
      compensationSent: false,
      inProgress: false,
      run: { status: 'needs_human', ended: false },
    });
    expect(await unsettled()).toBe(before + 1);
    const compId = res.body.compensation as string;

    // Still in front of a person, as compensation_required.
    expect((await queue()).find((x) => x.actionId === item.actionId)).toMatchObject({
      state: 'compensation_required',
      compensatedBy: compId,
    });

    h.sandbox.clearFaults();
    const report = await sweep();
    const comp = (await ledger.get(runId, compId))!;
    expect(comp.state).toBe('confirmed');
    expect(h.sandbox.counts().byResource.emails.byKey[comp.idempotencyKey]).toBe(1);
    const state = await h.ctx.store.readState(runId);
    expect(state?.status).toBe('failed');
    expect(state?.reason).toMatch(/^compensated: /);
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);
    expect(report.compensations).toMatchObject({ driven: 1, ended: 1, unsettled: 0 });

    // Nothing more: a second sweep sends nothing again.
    const sent = h.sandbox.counts().requests;
    expect((await sweep()).compensations.driven).toBe(0);
    expect(h.sandbox.counts().requests).toBe(sent);
  });

  it('left planned by a crash right after the link: the sweep authorizes, sends it and ends the run', async () => {
    const { runId, item } = await parkedEmail();
    // What compensate() writes before it drives, and nothing after (the API process died there).
    const comp = await linkCompensation(runId, item);
    expect((await queue()).find((x) => x.actionId === item.actionId)?.state).toBe('compensation_required');

    const report = await sweep();
    expect((await ledger.get(runId, comp.actionId))?.state).toBe('confirmed');
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^compensated: /);
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);
    expect(report.compensations).toMatchObject({ driven: 1, ended: 1 });
  });

  it('confirmed before the run ended (the process died between): the sweep ends the run, sending nothing', async () => {
    const { runId, item } = await parkedEmail();
    const comp = await linkCompensation(runId, item);
    // Driven to confirmed as compensate() does, and no further: the run is not ended.
    await ledger.transition(runId, comp.actionId, 'planned', 'authorized', { by: 'olga', why: 'compensation' });
    const spec = (await h.ctx.store.readSpec(runId))!;
    const tool = h.ctx.agents.get(spec.agent)!.tools.get(comp.tool) as WriteTool;
    const ctx = { runId, step: comp.step, signal: new AbortController().signal, input: spec.input };
    await createEffectRunner(h.ctx).settle(comp.actionId, tool, comp.args, ctx, spec.tenant);
    expect((await ledger.get(runId, comp.actionId))?.state).toBe('confirmed');
    expect((await h.ctx.store.readState(runId))?.status).toBe('needs_human');

    const sent = h.sandbox.counts().requests;
    const report = await sweep();
    expect(h.sandbox.counts().requests).toBe(sent);
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^compensated: /);
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);
    expect(report.compensations).toMatchObject({ driven: 1, ended: 1 });
  });
});

/** What the release before the sweep left: the original out of the human queue once its compensation was ordered. */
async function leftOutByEarlierRelease(actionId: string, runId: string): Promise<void> {
  await h.ctx.redis.zrem(h.ctx.keys.humanQueue(h.ctx.keys.shardOf(runId)), actionId);
  expect((await queue()).some((x) => x.runId === runId)).toBe(false);
  expect((await h.ctx.store.readState(runId))?.status).toBe('needs_human');
}

/** A compensation confirmed (as compensate() drives it) and nothing after: its run is not ended. */
async function confirmedCompensation(runId: string, item: Item): Promise<ActionRecord> {
  const comp = await linkCompensation(runId, item);
  await ledger.transition(runId, comp.actionId, 'planned', 'authorized', { by: 'olga', why: 'compensation' });
  const spec = (await h.ctx.store.readSpec(runId))!;
  const tool = h.ctx.agents.get(spec.agent)!.tools.get(comp.tool) as WriteTool;
  const ctx = { runId, step: comp.step, signal: new AbortController().signal, input: spec.input };
  await createEffectRunner(h.ctx).settle(comp.actionId, tool, comp.args, ctx, spec.tenant);
  const confirmed = (await ledger.get(runId, comp.actionId))!;
  expect(confirmed.state).toBe('confirmed');
  return confirmed;
}

const requeued = async () =>
  ((await h.ctx.metrics.compensationsRequeued.get()).values ?? []).reduce((n, v) => n + v.value, 0);

describe('an original an earlier release left out of the human queue', () => {
  it('its compensation in safe_retry: the reconciler queues it again, the sweep sends it and ends the run', async () => {
    const { runId, item } = await parkedEmail();
    h.sandbox.setFaults([{ kind: 'rate_limit', resource: 'emails', retryAfterS: 0 }]);
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'compensate',
      evidence: {},
    });
    expect(res.body).toMatchObject({ state: 'compensation_required', compensationState: 'safe_retry' });
    const compId = res.body.compensation as string;
    h.sandbox.clearFaults();
    const movedAt = (await ledger.get(runId, item.actionId))!.updatedAt;
    await leftOutByEarlierRelease(item.actionId, runId);
    const before = await requeued();

    // Its driver's lease held: the first sweep queues it again and leaves it to that driver.
    await ledger.lease(runId, compId, 'olga', 60_000);
    const out = captureLines();
    const reconciler = new Reconciler({ ...h.ctx, log: pino(out.stream) }, 'reconciler:compsweep');
    const first = await reconciler.sweep();
    expect(first.compensations).toMatchObject({ requeued: 1, skippedLive: 1, driven: 0 });
    expect(await requeued()).toBe(before + 1);
    expect(out.lines().filter((l) => l.code === 'compensation_requeued')).toEqual([
      expect.objectContaining({ runId, actionId: item.actionId, compensation: compId }),
    ]);
    // Listed again, since the time of its move to compensation_required (the score the ledger gives it).
    const listed = (await queue()).find((x) => x.actionId === item.actionId) as (Item & { since: number }) | undefined;
    expect(listed).toMatchObject({ state: 'compensation_required', compensatedBy: compId, since: movedAt });

    await ledger.releaseLease(runId, compId, 'olga');
    const report = await reconciler.sweep();
    expect(report.compensations).toMatchObject({ requeued: 0, driven: 1, ended: 1, unsettled: 0 });
    const comp = (await ledger.get(runId, compId))!;
    expect(comp.state).toBe('confirmed');
    expect(h.sandbox.counts().byResource.emails.byKey[comp.idempotencyKey]).toBe(1);
    const state = await h.ctx.store.readState(runId);
    expect(state?.status).toBe('failed');
    expect(state?.reason).toMatch(/^compensated: /);
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);

    // Nothing more: a new reconciler's walk finds nothing, writes nothing, sends nothing.
    const sent = h.sandbox.counts().requests;
    const again = await new Reconciler(h.ctx, 'reconciler:compsweep').sweep();
    expect(again.compensations).toMatchObject({ requeued: 0, driven: 0 });
    expect(h.sandbox.counts().requests).toBe(sent);
    expect(await requeued()).toBe(before + 1);
  });

  it('its compensation confirmed, the run never ended: queued again, the sweep ends the run, sending nothing', async () => {
    const { runId, item } = await parkedEmail();
    await confirmedCompensation(runId, item);
    await leftOutByEarlierRelease(item.actionId, runId);

    const sent = h.sandbox.counts().requests;
    const report = await sweep();
    expect(h.sandbox.counts().requests).toBe(sent);
    expect(report.compensations).toMatchObject({ requeued: 1, driven: 1, ended: 1 });
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^compensated: /);
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);
  });

  it('its compensation confirmed before the run parked again (it went on at work): left out, the run not ended', async () => {
    const { runId, item } = await parkedEmail();
    const comp = await confirmedCompensation(runId, item);
    await leftOutByEarlierRelease(item.actionId, runId);
    // The run went on after the compensation was delivered and parked again later, for another action.
    const shard = h.ctx.keys.shardOf(runId);
    await h.ctx.redis.zadd(h.ctx.keys.runsByStatus(shard, 'needs_human'), 'XX', comp.updatedAt + 1000, runId);

    const report = await sweep();
    expect(report.compensations).toMatchObject({ requeued: 0, driven: 0 });
    expect(await ledger.inHumanQueue(runId, item.actionId)).toBe(false);
    expect((await h.ctx.store.readState(runId))?.status).toBe('needs_human');
  });
});
