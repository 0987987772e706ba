/**
 * Flow control and parked runs: a run parked for a version change gave its slot back; continued under
 * a served version it takes one again, once (a second continue changes nothing), and gives it back when
 * it ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { createLogger } from '../../src/metrics/log.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { runIdFor } from '../../src/store/keys.js';
import { loadConfig } from '../../src/config/config.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import type { RunSpec } from '../../src/runs/spec.js';
import { versionedAgent } from '../fixtures/versioned/agents.js';
import { call, OPERATOR_TOKEN } from './operators/support.js';
import { until } from '../../testkit/until.js';

const usage = { promptTokens: 10, completionTokens: 5 };
const v1 = versionedAgent('1');
const v2 = versionedAgent('2');
const QUEUE = '/v1/operators/version-mismatches';

let h: Harness;
let url: string;
let ctx2: EngineContext;
let worker: FleetWorker;

beforeAll(async () => {
  h = await createHarness('flowparked', {
    OPERATOR_TOKEN,
    FLOW_CONTROL: 'true',
    VERSION_HEARTBEAT_MS: '100',
    VERSION_TTL_MS: '600',
    VERSION_HANDBACK_DELAY_MS: '10',
  });
  url = (await h.startApi()).url;
  const cfg = loadConfig(h.env);
  ctx2 = await createContext(cfg, 'flowparked-v2', {
    agents: [v2],
    log: createLogger('flowparked', cfg.LOG_LEVEL),
    metrics: newMetrics(),
  });
  worker = new FleetWorker(ctx2, { effects: createEffectRunner(ctx2) });
  await worker.start();
});
afterAll(async () => {
  await worker.stop(true);
  await h.close();
  await ctx2.close();
});

/** A v1 run (only a v2 worker serves the agent: it parks version_mismatch at its first step). */
async function createRun(script: unknown[]): Promise<string> {
  const id = `FP-${Date.now()}`;
  const now = Date.now();
  const spec: RunSpec = {
    v: 2,
    runId: runIdFor('acme', 'versioned', id),
    tenant: 'acme',
    agent: 'versioned',
    key: id,
    input: { id },
    model: 'scripted',
    script,
    agentVersion: v1.version,
    toolsHash: v1.tools.schemaHash,
    limits: { maxSteps: 20, maxTokens: 10_000, maxWallMs: 60_000, deadlineAt: now + 60_000 },
    createdAt: now,
  };
  expect(await h.ctx.store.create(spec, now)).toBe(true);
  return spec.runId;
}

const heldCount = async () => Number((await h.ctx.redis.hget(h.ctx.keys.flow().counts, 't:acme')) ?? 0);

describe('flow control and a version continue', () => {
  it('the continued run takes its slot once and gives it back when it ends', async () => {
    // Eight steps of work after the continue: the slot is sampled while it works.
    const lookups = Array.from({ length: 8 }, (_, i) => ({
      toolCalls: [{ name: 'lookup', args: { q: `q${i}` } }],
      usage,
      transientFailures: 0,
    }));
    const runId = await createRun([...lookups, { toolCalls: [], final: 'done', usage, transientFailures: 0 }]);
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    expect(await heldCount()).toBe(0);
    const cont = await call(url, 'POST', `${QUEUE}/${runId}/continue`, {});
    expect(cont.status).toBe(200);
    const afterContinue = await heldCount();
    expect((await call(url, 'POST', `${QUEUE}/${runId}/continue`, {})).status).toBe(409);
    // Held once while it works; the second continue took nothing.
    expect(afterContinue).toBe(1);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('running');
    expect(await heldCount()).toBe(1);
    expect(await h.ctx.redis.hexists(h.ctx.keys.flow().held, runId)).toBe(1);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    await until('the slot given back', 5000, async () => (await heldCount()) === 0);
  }, 30_000);
});
