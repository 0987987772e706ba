/**
 * A child run put back to work after its parent took its outcome, through the real HTTP API and a real worker. A
 * child that parks `needs_human` counts as ended: its parent wakes, is charged what the child spent so far, and goes
 * on. A retry of that child, a resume after a person's finding on its action, or any other way back to work would let
 * it spend again from the limits carved out of what the parent had left before it spent more, charged to nobody (the
 * tree spent 550,280 µ$ against its parent's 300,000 cap in the review's repro). So:
 *  - the retry is 409 `parent_moved_on` naming the parent, nothing written, nothing spent (the typed client's
 *    Conflict carries `parentRunId`);
 *  - a finding on the child's action settles the action (the person's word on the effect is recorded) and does not
 *    resume the child, which ends `cancelled` / `parent_moved_on: <parent>`;
 *  - the parent's wake taking the child's outcome between the retry's read of the parent (on another shard) and the
 *    retry's script: the wake marks the child on its own slot before it commits, and the script refuses a marked
 *    child, 409 `parent_moved_on`, nothing written; so does the resume after a finding (the child ends
 *    `cancelled` / `parent_moved_on`). Held here at the wake's crash point between its mark and its commit;
 *  - a child that got back to work anyway (a child of a parent whose wake committed before children were marked,
 *    retried on a stale read of the parent: simulated here) ends `cancelled` / `parent_moved_on` at its next step,
 *    before any model call;
 *  - while the parent still waits on the child (`waiting_child` on it: a sibling is still at work), the retry is
 *    allowed, and the parent's wake charges everything the child spent, the retried part included.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { retryRun } from '../../src/runs/retryRun.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { Conflict, FleetClient } from '../../src/client/index.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import type { FleetWorker } from '../../src/worker/fleetWorker.js';
import { until } from '../../testkit/until.js';
import type { RunField } from '../../src/store/runRecord.js';
import {
  boss,
  bossNaps,
  childrenOf as childrenOfIn,
  costOf as costOfIn,
  delegate,
  ENDED,
  kid,
  OPERATOR_TOKEN,
  post as postTo,
  small,
  snapshot as snapshotIn,
  startBoss as startBossIn,
  wakeHold,
} from '../support/childRuns.js';

/** A parent's wake held by a test after it marked its children as taken, before its commit. */
const wakes = wakeHold();

let h: Harness;
let ctx: EngineContext;
let w1: FleetWorker;
let url: string;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('child-retry', { MODEL_MAX_ATTEMPTS: '1', MODEL_OUTAGE_MAX_MS: '0', OPERATOR_TOKEN });
  ctx = await createContext(h.cfg, 'child-retry-w1', { agents: [boss, kid] });
  w1 = await h.startWorker({ crash: wakes.crash }, ctx);
  url = (await h.startApi()).url;
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

const post = (path: string, body: unknown) => postTo(url, path, body);
const startBoss = (id: string, turns: unknown[]) => startBossIn(ctx, id, turns);
const childrenOf = (parent: string, n: number) => childrenOfIn(ctx, parent, n);
const snapshot = (runId: string) => snapshotIn(h.ctx, runId);
const costOf = (runId: string) => costOfIn(h.ctx, runId);

describe('a child run whose parent took its outcome and moved on', () => {
  it('a retry of it is 409 parent_moved_on, nothing written, nothing spent', async () => {
    const parent = await startBoss('B-retry', [
      { toolCalls: [delegate('K-retry', 'flaky')], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    // The parent woke on the child's park (child_needs_human), was charged what it spent, and went on: it naps.
    expect(await h.waitForStatus(parent, ['sleeping'])).toBe('sleeping');
    const before = { child: await snapshot(child!), parent: await snapshot(parent) };

    const r = await post(`/v1/runs/${child}/retry`, {});
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({
      error: 'parent_moved_on',
      runId: child,
      parentRunId: parent,
      parentStatus: 'sleeping',
    });
    // The typed client surfaces it as a Conflict naming the parent.
    const fleet = new FleetClient({ url, token: OPERATOR_TOKEN });
    const err = await fleet.retryRun(child!, { steps: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Conflict);
    expect((err as Conflict).code).toBe('parent_moved_on');
    expect((err as Conflict).parentRunId).toBe(parent);

    expect({ child: await snapshot(child!), parent: await snapshot(parent) }).toEqual(before);
  });

  it('a finding on its action settles the action and ends the child, which is not resumed', async () => {
    const parent = await startBoss('B-ship', [
      { toolCalls: [delegate('K-ship', 'ship')], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    expect(await h.waitForStatus(parent, ['sleeping'])).toBe('sleeping');
    const [action] = await ledger.listForRun(child!);
    expect(action).toMatchObject({ tool: 'ship', state: 'needs_human' });
    const spent = await costOf(child!);

    const r = await post(`/v1/reconciliations/${action!.actionId}`, {
      finding: 'confirmed',
      receipt: 'PARCEL-1',
      evidence: { checked: 'the carrier says it shipped' },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      actionId: action!.actionId,
      runId: child,
      state: 'confirmed',
      resumed: false,
      parentRunId: parent,
      runStatus: 'cancelled',
    });
    // The person's word about the effect is recorded.
    expect(await ledger.get(child!, action!.actionId)).toMatchObject({ state: 'confirmed', receipt: 'PARCEL-1' });
    const state = (await h.ctx.store.readState(child!))!;
    expect(state.status).toBe('cancelled');
    expect(state.reason).toBe(`parent_moved_on: ${parent}`);
    await h.untilNoJob(child!);
    expect(await costOf(child!)).toBe(spent);
  });

  /** A boss whose child parks `mode`, the boss's wake held after it marked the child, before its commit. */
  async function heldWake(id: string, mode: 'flaky' | 'ship') {
    const { held } = wakes.hold();
    const parent = await startBoss(`B-${id}`, [
      { toolCalls: [delegate(`K-${id}`, mode)], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    await held();
    // The parent still waits on the child: an operator's read of the parent finds it waiting on this child.
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parent).run, 'status')).toBe('waiting_child');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(child!).run, 'outcomeTakenBy' satisfies RunField)).toBe(parent);
    return { parent, child: child! };
  }

  it("a retry between the parent's wake taking its outcome and the wake's commit: 409 parent_moved_on, nothing written", async () => {
    const { parent, child } = await heldWake('mark', 'flaky');
    try {
      const before = await snapshot(child);
      const r = await post(`/v1/runs/${child}/retry`, {});
      expect(r).toMatchObject({
        status: 409,
        body: { error: 'parent_moved_on', runId: child, parentRunId: parent, parentStatus: 'waiting_child' },
      });
      expect(await snapshot(child)).toEqual(before);
    } finally {
      wakes.release();
    }
    // The wake's next attempt commits: the parent took the child's outcome and goes on.
    expect(await h.waitForStatus(parent, ['sleeping'], 15_000)).toBe('sleeping');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(child).run, 'status')).toBe('needs_human');
  }, 30_000);

  it('a finding in that window settles the action and ends the child, which is not resumed', async () => {
    const { parent, child } = await heldWake('mark-ship', 'ship');
    let r: Awaited<ReturnType<typeof post>>;
    const [action] = await ledger.listForRun(child);
    try {
      r = await post(`/v1/reconciliations/${action!.actionId}`, {
        finding: 'confirmed',
        receipt: 'PARCEL-2',
        evidence: { checked: 'the carrier says it shipped' },
      });
    } finally {
      wakes.release();
    }
    expect(r).toMatchObject({
      status: 200,
      body: { state: 'confirmed', resumed: false, parentRunId: parent, parentStatus: 'waiting_child' },
    });
    expect((await h.ctx.store.readState(child))!.reason).toBe(`parent_moved_on: ${parent}`);
    await h.untilNoJob(child);
    expect(await h.waitForStatus(parent, ['sleeping'], 15_000)).toBe('sleeping');
  }, 30_000);

  it('a child that got back to work anyway ends parent_moved_on at its next step, before any model call', async () => {
    const parent = await startBoss('B-race', [
      { toolCalls: [delegate('K-race', 'flaky')], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    expect(await h.waitForStatus(parent, ['sleeping'])).toBe('sleeping');
    const spent = await costOf(child!);
    // A child of a parent whose wake committed before children were marked (a run of an earlier release), retried on
    // a read of the parent from before that wake: simulated by the mark taken off and the child's spec read without
    // its parent.
    await h.ctx.redis.hdel(h.ctx.keys.run(child!).run, 'outcomeTakenBy' satisfies RunField);
    const read = vi.spyOn(h.ctx.store, 'readSpec').mockResolvedValueOnce(undefined);
    try {
      expect((await retryRun(h.ctx, child!, 'ops-ada', {})).ok).toBe(true);
    } finally {
      read.mockRestore();
    }
    expect(await h.waitForStatus(child!, ENDED)).toBe('cancelled');
    expect((await h.ctx.store.readState(child!))!.reason).toBe(`parent_moved_on: ${parent}`);
    expect(await costOf(child!)).toBe(spent);
  });

  it('while the parent still waits on it, a retry goes on and the parent is charged all it spent', async () => {
    // Two children in one turn: K-a parks needs_human, K-b naps 4 s, so the parent still waits on both.
    const parent = await startBoss('B-wait', [
      { toolCalls: [delegate('K-a', 'flaky'), delegate('K-b', 'nap')], usage: small },
      { final: 'boss done', usage: small },
    ]);
    const children = await childrenOf(parent, 2);
    const a = await until('the flaky child', 10_000, async () => {
      for (const c of children) if ((await h.ctx.store.readState(c))?.status === 'needs_human') return c;
      return false;
    });
    const b = children.find((c) => c !== a)!;
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');
    // The provider is back: a worker whose attempts outlast the one 503.
    await w1.stop(true);
    const ctx2 = await createContext(
      loadConfig({ ...h.env, MODEL_MAX_ATTEMPTS: '2', MODEL_OUTAGE_MAX_MS: '0' }),
      'child-retry-w2',
      { agents: [boss, kid] },
    );
    await h.startWorker({}, ctx2);

    const r = await post(`/v1/runs/${a}/retry`, {});
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ runId: a, status: 'running', from: 'needs_human' });
    expect(await h.waitForStatus(a, ENDED)).toBe('completed');
    expect(await h.waitForStatus(b, ENDED)).toBe('completed');
    expect(await h.waitForStatus(parent, ENDED, 20_000)).toBe('completed');
    // The parent's wake charged both children's whole spend, the retried part included, on top of its own two turns.
    const [ca, cb, cp] = await Promise.all([costOf(a), costOf(b), costOf(parent)]);
    expect(ca).toBeGreaterThan(0);
    expect(cp).toBeGreaterThan(ca + cb);
    expect(cp).toBeLessThanOrEqual(300_000);
  }, 40_000);
});
