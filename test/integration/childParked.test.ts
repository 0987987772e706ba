/**
 * A child run parked for a person whose parent took its outcome and moved on, through the real HTTP API and real
 * workers: a boss hands a job to a kid, the kid parks, the boss goes on without it.
 *
 *  - Parked in the version queue (its pinned version served by no live worker): the parent wakes on the park
 *    (needs_human counts as ended), is charged what the kid spent, and naps. A version continue of the kid is 409
 *    `parent_moved_on` naming the parent, nothing written; while the parent still waits on the kid (a sibling still
 *    at work), the continue goes on and the kid completes under the served version.
 *  - Parked for an approval: the parent waits on the kid until its own deadline, then wakes without it and ends.
 *    An approval of the kid's action is void: 409 `parent_moved_on` naming the parent, the action `rejected` (never
 *    sent), the kid `cancelled` / `parent_moved_on: <parent>` with no job left; while the parent still waits, the
 *    approval sends the action and the kid completes.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { createContext, type ContextOptions } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { approvalPolicy } from '../../src/ledger/approvals.js';
import { Ledger } from '../../src/ledger/ledger.js';
import type { FleetWorker } from '../../src/worker/fleetWorker.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { until } from '../../testkit/until.js';
import { createFullApi } from '../../src/http/fullApi.js';
import { createLogger } from '../../src/metrics/log.js';
import { captureLines } from '../support/logCapture.js';
import {
  boss,
  bossNaps,
  childrenOf,
  costOf,
  delegate,
  ENDED,
  handToSitter,
  kidAgent,
  OPERATOR_TOKEN,
  payments,
  post,
  sitter,
  small,
  snapshot,
  startBoss,
  wakeHold,
} from '../support/childRuns.js';

const QUEUE = '/v1/operators/version-mismatches';
const kid1 = kidAgent('kid@1');
const kid2 = kidAgent('kid@2');
const label = (a: typeof kid1) => `${a.version}/${a.tools.schemaHash}`;

/** A parent's wake held by a test after it marked its children as taken, before its commit. */
const wakes = wakeHold();
let h: Harness;
let server: Server;
const apiLog = captureLines();
let url: string;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('child-parked', {
    OPERATOR_TOKEN,
    MODEL_MAX_ATTEMPTS: '1',
    MODEL_OUTAGE_MAX_MS: '0',
    APPROVAL_RULES: JSON.stringify([{ tool: 'pay' }]),
    VERSION_HEARTBEAT_MS: '100',
    VERSION_TTL_MS: '600',
    VERSION_HANDBACK_DELAY_MS: '10',
  });
  // The API logs to `apiLog`: a request it refuses for a record it cannot read says so in a line of its own.
  const app = createFullApi({ ...h.ctx, log: createLogger('child-parked-api', 'info', apiLog.stream) }, () => true);
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  server.close();
  await h.close();
});

/**
 * Rewrites the run's stored spec as one the schema no longer reads: its `parent` without the call that asked (as a
 * spec written by hand, or by another version of the schema, could be). The field the refusals name.
 */
async function unreadableSpec(runId: string): Promise<string> {
  const k = h.ctx.keys.run(runId).run;
  const spec = JSON.parse((await h.ctx.redis.hget(k, 'spec'))!) as { parent: { runId: string; step: number } };
  await h.ctx.redis.hset(k, 'spec', JSON.stringify({ ...spec, parent: { runId: spec.parent.runId, step: 1 } }));
  return 'parent.callId';
}

/** The API's `spec_unreadable` lines about `runId`. */
const unreadableLogged = (runId: string) =>
  apiLog.lines().filter((l) => l.code === 'spec_unreadable' && l.runId === runId);

/** A worker of its own context loading `agents`; `env` on top of the harness's. */
async function worker(name: string, agents: ContextOptions['agents'], env = {}) {
  const cfg = loadConfig({ ...h.env, ...env });
  const ctx = await createContext(cfg, name, { agents });
  const w = await h.startWorker(
    { effects: createEffectRunner(ctx, { approvals: approvalPolicy(cfg.APPROVAL_RULES) }), crash: wakes.crash },
    ctx,
  );
  return { ctx, w };
}

describe('a child parked in the version queue', () => {
  let ctx: EngineContext;
  const workers: FleetWorker[] = [];
  beforeAll(async () => {
    // The parent's worker loads kid@1 (its children are pinned to it) but serves only boss@1 and the sitter; the
    // other serves kid@2 alone. No live worker serves kid@1: a kid's first step parks it version_mismatch.
    const a = await worker('child-parked-a', [boss, kid1, sitter], { WORKER_AGENT_VERSIONS: 'boss@1,sitter@1' });
    const b = await worker('child-parked-b', [kid2]);
    ctx = a.ctx;
    workers.push(a.w, b.w);
  });
  afterAll(async () => {
    for (const w of workers) await w.stop(true);
  });

  it('whose parent moved on: a continue is 409 parent_moved_on naming the parent, nothing written', async () => {
    const parent = await startBoss(ctx, 'B-cont', [
      { toolCalls: [delegate('K-cont', 'flaky')], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(ctx, parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    expect((await h.ctx.store.readState(child!))!.reason).toBe(
      `version_mismatch: pinned ${label(kid1)} served ${label(kid2)}`,
    );
    // The parent woke on the park, took the child's outcome and went on: it naps.
    expect(await h.waitForStatus(parent, ['sleeping'])).toBe('sleeping');
    const before = { child: await snapshot(h.ctx, child!), parent: await snapshot(h.ctx, parent) };

    const r = await post(url, `${QUEUE}/${child}/continue`, { agentVersion: 'kid@2' });
    expect(r).toMatchObject({
      status: 409,
      body: { error: 'parent_moved_on', runId: child, parentRunId: parent, parentStatus: 'sleeping' },
    });
    expect({ child: await snapshot(h.ctx, child!), parent: await snapshot(h.ctx, parent) }).toEqual(before);

    // Its way out is the cancel.
    const c = await post(url, `${QUEUE}/${child}/cancel`, {});
    expect(c.status).toBe(200);
    expect(await h.waitForStatus(child!, ENDED)).toBe('cancelled');
  });

  it("whose parent's wake took its outcome and has not committed: a continue is 409 parent_moved_on, nothing written", async () => {
    const { held } = wakes.hold();
    try {
      const parent = await startBoss(ctx, 'B-cont-mark', [
        { toolCalls: [delegate('K-cont-mark', 'answer')], usage: small },
        bossNaps,
        { final: 'boss done', usage: small },
      ]);
      const [child] = await childrenOf(ctx, parent, 1);
      expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
      await held();
      // The continue's read of the parent finds it waiting on this child; the child's mark refuses it in the script.
      expect(await h.ctx.redis.hget(h.ctx.keys.run(parent).run, 'status')).toBe('waiting_child');
      const before = await snapshot(h.ctx, child!);
      const r = await post(url, `${QUEUE}/${child}/continue`, { agentVersion: 'kid@2' });
      expect(r).toMatchObject({
        status: 409,
        body: { error: 'parent_moved_on', runId: child, parentRunId: parent, parentStatus: 'waiting_child' },
      });
      expect(await snapshot(h.ctx, child!)).toEqual(before);
      wakes.release();
      expect(await h.waitForStatus(parent, ['sleeping'], 15_000)).toBe('sleeping');
    } finally {
      wakes.release();
    }
  }, 30_000);

  it('whose stored spec no longer parses: a continue is 409 invalid_spec naming the field, logged, nothing written', async () => {
    const parent = await startBoss(ctx, 'B-cont-bad', [
      { toolCalls: [delegate('K-cont-bad', 'flaky')], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(ctx, parent, 1);
    expect(await h.waitForStatus(child!, ['needs_human'])).toBe('needs_human');
    expect(await h.waitForStatus(parent, ['sleeping'])).toBe('sleeping');
    const field = await unreadableSpec(child!);
    const before = await snapshot(h.ctx, child!);

    const r = await post(url, `${QUEUE}/${child}/continue`, { agentVersion: 'kid@2' });
    expect(r).toMatchObject({ status: 409, body: { error: 'invalid_spec', runId: child, field } });
    expect(await snapshot(h.ctx, child!)).toEqual(before);
    expect(unreadableLogged(child!)).toEqual([expect.objectContaining({ level: 40, field })]);
    // Its way out is the cancel.
    expect((await post(url, `${QUEUE}/${child}/cancel`, {})).status).toBe(200);
  });

  it('whose parent still waits on it: a continue goes on and it completes under the served version', async () => {
    // The sitter keeps the parent waiting_child on both while the kid is parked.
    const parent = await startBoss(ctx, 'B-cont-wait', [
      { toolCalls: [delegate('K-cont-wait', 'answer'), handToSitter('S-cont-wait', 60_000)], usage: small },
      { final: 'boss done', usage: small },
    ]);
    const children = await childrenOf(ctx, parent, 2);
    const kidRun = await until('the parked kid', 10_000, async () => {
      for (const c of children) if ((await h.ctx.store.readState(c))?.status === 'needs_human') return c;
      return false;
    });
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');

    const r = await post(url, `${QUEUE}/${kidRun}/continue`, { agentVersion: 'kid@2' });
    expect(r).toMatchObject({ status: 200, body: { runId: kidRun, from: label(kid1), to: label(kid2) } });
    expect(await h.waitForStatus(kidRun, ENDED)).toBe('completed');
    expect(await h.ctx.store.readSpec(kidRun)).toMatchObject({ agentVersion: 'kid@2' });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parent).run, 'status')).toBe('waiting_child');
  });
});

describe('a child waiting for an approval', () => {
  let ctx: EngineContext;
  let w: FleetWorker;
  beforeAll(async () => {
    ({ ctx, w } = await worker('child-parked-c', [boss, kid1, sitter]));
  });
  afterAll(async () => {
    await w.stop(true);
  });

  async function pendingOf(runId: string): Promise<{ actionId: string; fingerprint: string }> {
    expect(await h.waitForStatus(runId, ['waiting_approval'])).toBe('waiting_approval');
    return until(`the approval of ${runId}`, 10_000, async () => {
      const res = await fetch(`${url}/v1/approvals`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
      const list = (await res.json()) as { approvals: { runId: string; actionId: string; fingerprint: string }[] };
      return list.approvals.find((a) => a.runId === runId) ?? false;
    });
  }

  it('whose parent moved on: an approval is void, 409 parent_moved_on, nothing sent, the child ends', async () => {
    // The parent's wall clock is short: it waits on the kid until its deadline, wakes without the kid's outcome and
    // ends.
    const parent = await startBoss(
      ctx,
      'B-pay',
      [
        { toolCalls: [delegate('K-pay', 'pay')], usage: small },
        { final: 'boss done', usage: small },
      ],
      { maxWallMs: 4_000 },
    );
    const [child] = await childrenOf(ctx, parent, 1);
    const p = await pendingOf(child!);
    expect(await h.waitForStatus(parent, ENDED, 15_000)).toBeDefined();
    const spent = await costOf(h.ctx, child!);

    const r = await post(url, `/v1/approvals/${p.actionId}`, { decision: 'approve', fingerprint: p.fingerprint });
    expect(r).toMatchObject({
      status: 409,
      body: { error: 'parent_moved_on', actionId: p.actionId, parentRunId: parent, state: 'rejected' },
    });
    expect(await ledger.get(child!, p.actionId)).toMatchObject({ state: 'rejected' });
    const state = (await h.ctx.store.readState(child!))!;
    expect(state.status).toBe('cancelled');
    expect(state.reason).toBe(`parent_moved_on: ${parent}`);
    await h.untilNoJob(child!);
    expect(await costOf(h.ctx, child!)).toBe(spent);
    expect(payments).not.toContain('K-pay');
  }, 30_000);

  it('whose parent still waits on it: the approval sends the action and the child completes', async () => {
    const parent = await startBoss(ctx, 'B-pay-wait', [
      { toolCalls: [delegate('K-pay-wait', 'pay')], usage: small },
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(ctx, parent, 1);
    const p = await pendingOf(child!);
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');

    const r = await post(url, `/v1/approvals/${p.actionId}`, { decision: 'approve', fingerprint: p.fingerprint });
    expect(r).toMatchObject({ status: 200, body: { actionId: p.actionId, state: 'authorized' } });
    expect(await h.waitForStatus(child!, ENDED)).toBe('completed');
    expect(await ledger.get(child!, p.actionId)).toMatchObject({ state: 'confirmed', receipt: 'paid-K-pay-wait' });
    expect(payments.filter((i) => i === 'K-pay-wait')).toHaveLength(1);
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
  });
});

describe('a child whose stored spec no longer parses', () => {
  let ctx: EngineContext;
  let w: FleetWorker;
  beforeAll(async () => {
    ({ ctx, w } = await worker('child-parked-d', [boss, kid1]));
  });
  afterAll(async () => {
    await w.stop(true);
  });

  /** A kid in `mode` parked `status`, with its stored spec made unreadable: the kid and the field. */
  async function parkedKid(id: string, mode: 'flaky' | 'ship' | 'pay', status: string) {
    const parent = await startBoss(ctx, `B-${id}`, [
      { toolCalls: [delegate(`K-${id}`, mode)], usage: small },
      bossNaps,
      { final: 'boss done', usage: small },
    ]);
    const [child] = await childrenOf(ctx, parent, 1);
    expect(await h.waitForStatus(child!, [status])).toBe(status);
    // The parent settles first (it took a needs_human kid's outcome and naps; it waits on a kid waiting for approval).
    const parentStatus = status === 'needs_human' ? 'sleeping' : 'waiting_child';
    expect(await h.waitForStatus(parent, [parentStatus])).toBe(parentStatus);
    return { child: child!, field: await unreadableSpec(child!) };
  }

  it('a retry is 409 invalid_spec naming the field, logged, nothing written', async () => {
    const { child, field } = await parkedKid('retry-bad', 'flaky', 'needs_human');
    const before = await snapshot(h.ctx, child);
    const r = await post(url, `/v1/runs/${child}/retry`, { steps: 2 });
    expect(r).toMatchObject({ status: 409, body: { error: 'invalid_spec', runId: child, field } });
    expect(await snapshot(h.ctx, child)).toEqual(before);
    expect(unreadableLogged(child)).toEqual([expect.objectContaining({ level: 40, field })]);
  });

  it('an approval is void, 409 invalid_spec: the action rejected and never sent, the run failed invalid_spec', async () => {
    const { child, field } = await parkedKid('pay-bad', 'pay', 'waiting_approval');
    const p = await until(`the approval of ${child}`, 10_000, async () => {
      const [rec] = await ledger.listForRun(child);
      return rec?.state === 'planned' && rec;
    });
    const pending = await fetch(`${url}/v1/approvals`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    const { approvals } = (await pending.json()) as { approvals: { actionId: string; fingerprint: string }[] };
    const { fingerprint } = approvals.find((a) => a.actionId === p.actionId)!;

    const r = await post(url, `/v1/approvals/${p.actionId}`, { decision: 'approve', fingerprint });
    expect(r).toMatchObject({
      status: 409,
      body: { error: 'invalid_spec', actionId: p.actionId, field, state: 'rejected' },
    });
    expect(await ledger.get(child, p.actionId)).toMatchObject({ state: 'rejected' });
    const state = (await h.ctx.store.readState(child))!;
    expect([state.status, state.reason]).toEqual(['failed', `invalid_spec: ${field}`]);
    await h.untilNoJob(child);
    expect(payments).not.toContain('K-pay-bad');
    expect(unreadableLogged(child)).toEqual([expect.objectContaining({ level: 40, field })]);
  });

  it('a finding is recorded; the run is not resumed and ends failed invalid_spec, as its step would end it', async () => {
    const { child, field } = await parkedKid('ship-bad', 'ship', 'needs_human');
    const [action] = await ledger.listForRun(child);
    expect(action).toMatchObject({ tool: 'ship', state: 'needs_human' });
    const r = await post(url, `/v1/reconciliations/${action!.actionId}`, {
      finding: 'confirmed',
      receipt: 'PARCEL-9',
      evidence: { checked: 'the carrier says it shipped' },
    });
    expect(r).toMatchObject({
      status: 200,
      body: { actionId: action!.actionId, state: 'confirmed', resumed: false, invalidSpec: field, runStatus: 'failed' },
    });
    expect(await ledger.get(child, action!.actionId)).toMatchObject({ state: 'confirmed', receipt: 'PARCEL-9' });
    expect((await h.ctx.store.readState(child))!.reason).toBe(`invalid_spec: ${field}`);
    await h.untilNoJob(child);
  });
});
