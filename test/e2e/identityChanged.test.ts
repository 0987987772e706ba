/**
 * A refund sent by release 1 of an agent, whose worker process died before the answer was recorded; release 2
 * changed the refund tool's `identity`. The run parks `version_mismatch` on release 2's worker, an operator continues
 * it there (the version queue's continue), and release 2 replays release 1's journalled call: it drives the action
 * release 1 planned, under the key release 1 sent, and Stripe's stand-in makes one refund.
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
const refund = { orderId: 'O-1', amountCents: 1500, currency: 'EUR', reason: 'broken on arrival' };

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

/** The fixture's agent of `release`, built as a worker builds it. */
async function agentOf(release: '1' | '2') {
  const catalog = await loadAgents({ ...h.cfg, AGENTS_MODULE: FIXTURE }, { ...h.env, REFUNDS_RELEASE: release });
  return catalog.get('refunds')!;
}

async function worker(release: '1' | '2', crashPoint?: string): Promise<WorkerProcess> {
  const w = await spawnWorker(
    { ...h.env, ...SHORT_LOCK, AGENTS_MODULE: FIXTURE, REFUNDS_RELEASE: release },
    crashPoint ? { crashPoint } : {},
  );
  workers.push(w);
  return w;
}

describe("a version continue replays a write whose tool's identity changed", () => {
  it('one refund at Stripe, one action in the ledger, under the key release 1 sent', async () => {
    const [v1, v2] = [await agentOf('1'), await agentOf('2')];
    const now = Date.now();
    const spec: RunSpec = {
      v: 2,
      runId: runIdFor('acme', 'refunds', 'O-1'),
      tenant: 'acme',
      agent: 'refunds',
      key: 'O-1',
      input: { orderId: 'O-1', amountCents: 1500 },
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
    expect(h.sandbox.counts().byResource.refunds.records).toBe(1);
    const tool = (a: typeof v1) => a.tools.get('refund') as WriteTool;
    const sentUnder = actionIdentity(runId, tool(v1), refund);
    expect(actionIdentity(runId, tool(v2), refund).actionId).not.toBe(sentUnder.actionId);

    // Release 2's worker meets the run once release 1's announcement lapses: parked in the version queue.
    await worker('2');
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'], 30_000)).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^version_mismatch: /);
    const cont = await call(url, 'POST', `/v1/operators/version-mismatches/${runId}/continue`, {});
    expect(cont).toMatchObject({ status: 200, body: { to: `${v2.version}/${v2.tools.schemaHash}` } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');

    const counts = h.sandbox.counts();
    expect(counts.byResource.refunds.records).toBe(1);
    expect(counts.duplicates).toBe(0);
    expect(Object.keys(counts.byResource.refunds.byKey)).toEqual([sentUnder.idempotencyKey]);
    const actions = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
    expect(actions.map((a) => [a.actionId, a.state])).toEqual([[sentUnder.actionId, 'confirmed']]);
  });
});
