/**
 * A refund sent by release 1 of an agent, whose worker process died before the answer was recorded; a later release
 * changed the refund tool: its `identity` (release 2), or its arguments too (release 3 requires one the journalled
 * call lacks). The run parks `version_mismatch` on the later release's worker, an operator continues it there (the
 * version queue's continue), and the later release replays release 1's journalled call: it drives the action release
 * 1 planned, under the key release 1 sent and with the arguments it recorded, and Stripe's stand-in makes one refund.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { runIdFor } from '../../src/store/keys.js';
import type { RunSpec } from '../../src/runs/spec.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { loadAgents } from '../../src/server/loadAgents.js';
import type { WriteTool } from '../../src/core/tool.js';
import { SHORT_LOCK } from '../support/crashVictim.js';
import { call, OPERATOR_TOKEN } from '../integration/operators/support.js';

const FIXTURE = 'test/fixtures/refundReleases.ts';
const usage = { promptTokens: 20, completionTokens: 5 };

let h: Harness;
let url: string;
const workers: WorkerProcess[] = [];
beforeAll(async () => {
  h = await createHarness('identity-e2e', {
    OPERATOR_TOKEN,
    VERSION_HEARTBEAT_MS: '200',
    VERSION_TTL_MS: '1500',
    VERSION_HANDBACK_DELAY_MS: '20',
    RECONCILE_DEADLINE_MS: '2000',
    RECONCILE_POLL_MS: '50',
  });
  url = (await h.startApi()).url;
});
afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await h.close();
});

type Release = '1' | '2' | '3';

/** The fixture's agent of `release`, built as a worker builds it. */
async function agentOf(release: Release) {
  const catalog = await loadAgents({ ...h.cfg, AGENTS_MODULE: FIXTURE }, { ...h.env, REFUNDS_RELEASE: release });
  return catalog.get('refunds')!;
}

async function worker(release: Release, crashPoint?: string): Promise<WorkerProcess> {
  const w = await spawnWorker(
    { ...h.env, ...SHORT_LOCK, AGENTS_MODULE: FIXTURE, REFUNDS_RELEASE: release },
    crashPoint ? { crashPoint } : {},
  );
  workers.push(w);
  return w;
}

/**
 * A run of release 1 whose refund release 1 sends before its worker dies, continued by an operator under `release`
 * and run to its end there: the run id, the identity release 1 sent the refund under, and release 1's refund call.
 */
async function continuedUnder(release: Release, orderId: string) {
  const [v1, later] = [await agentOf('1'), await agentOf(release)];
  const refund = { orderId, amountCents: 1500, currency: 'EUR', reason: 'broken on arrival' };
  const now = Date.now();
  const spec: RunSpec = {
    v: 2,
    runId: runIdFor('acme', 'refunds', orderId),
    tenant: 'acme',
    agent: 'refunds',
    key: orderId,
    input: { orderId, amountCents: 1500 },
    model: 'scripted',
    script: [
      { toolCalls: [{ name: 'refund', args: refund }], usage },
      { toolCalls: [], final: 'refunded', usage },
    ],
    agentVersion: v1.version,
    toolsHash: v1.tools.schemaHash,
    limits: { maxSteps: 5, maxTokens: 10_000, maxWallMs: 120_000, deadlineAt: now + 120_000 },
    createdAt: now,
  };
  expect(await h.ctx.store.create(spec, now)).toBe(true);
  const { runId } = spec;

  // Release 1 sends the refund and dies before its answer is recorded.
  const victim = await worker('1', 'after_call@1');
  expect((await victim.exited).signal).toBe('SIGKILL');
  expect(refundsOf(runId)).toHaveLength(1);
  const tool = (a: typeof v1) => a.tools.get('refund') as WriteTool;
  const sentUnder = actionIdentity(runId, tool(v1), refund);

  // The later release's worker meets the run once release 1's announcement lapses: parked in the version queue.
  const survivor = await worker(release);
  try {
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'], 30_000)).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^version_mismatch: /);
    const cont = await call(url, 'POST', `/v1/operators/version-mismatches/${runId}/continue`, {
      agentVersion: later.version,
    });
    expect(cont).toMatchObject({ status: 200, body: { to: `${later.version}/${later.tools.schemaHash}` } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
  } finally {
    survivor.child.kill('SIGKILL');
    await survivor.exited;
  }
  return { runId, sentUnder, refund, release1: tool(v1), later: tool(later) };
}

/** The refunds Stripe's stand-in made for the run (their keys name it). */
const refundsOf = (runId: string) =>
  h.sandbox.records('refunds').filter((r) => r.idempotencyKey?.startsWith(`${runId}:`));

describe('a version continue replays a write whose tool changed since it was sent', () => {
  it("the tool's identity changed: one refund at Stripe, one action, under the key release 1 sent", async () => {
    const { runId, sentUnder, refund, later } = await continuedUnder('2', 'O-1');
    expect(actionIdentity(runId, later, refund).actionId).not.toBe(sentUnder.actionId);
    expect(refundsOf(runId).map((r) => r.idempotencyKey)).toEqual([sentUnder.idempotencyKey]);
    expect(h.sandbox.counts().duplicates).toBe(0);
    const actions = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
    expect(actions.map((a) => [a.actionId, a.state])).toEqual([[sentUnder.actionId, 'confirmed']]);
  });

  it('its arguments changed (the journalled call lacks one): the refund it sent is settled and answered, not a format error', async () => {
    const { runId, sentUnder, refund, later } = await continuedUnder('3', 'O-2');
    expect(later.args.safeParse(refund).success).toBe(false);
    expect(refundsOf(runId).map((r) => r.idempotencyKey)).toEqual([sentUnder.idempotencyKey]);
    const actions = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
    expect(actions.map((a) => [a.actionId, a.state])).toEqual([[sentUnder.actionId, 'confirmed']]);
    const observed = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');
    expect(observed.at(-1)).toMatchObject({ tool: 'refund', status: 'ok', actionId: sentUnder.actionId });
    expect(observed.some((e) => e.status === 'format_error')).toBe(false);
  });
});
