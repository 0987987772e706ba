/**
 * Agent versions side by side, and the version queue. A worker serves the
 * versions of the agents it loaded (or WORKER_AGENT_VERSIONS) and announces
 * them; a step of a version it does not serve is handed back while a live
 * worker announces that version, else the run parks needs_human /
 * version_mismatch in the version queue, where an operator continues it under a
 * served version (re-pinned, journalled with who, ledger untouched) or cancels it.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../testkit/until.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { createLogger } from '../../src/metrics/log.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { approvalPolicy } from '../../src/ledger/approvals.js';
import { runIdFor } from '../../src/store/keys.js';
import { VersionRegistry } from '../../src/runs/versions.js';
import { loadConfig } from '../../src/config/config.js';
import { VersionGate } from '../../src/worker/versionGate.js';
import { AgentCatalog } from '../../src/core/agent.js';
import type { RunSpec } from '../../src/runs/spec.js';
import type { FleetWorker } from '../../src/worker/fleetWorker.js';
import { versionedAgent } from '../fixtures/versioned/agents.js';
import { agentctl, call, OPERATOR_TOKEN } from './operators/support.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const usage = { promptTokens: 10, completionTokens: 5 };
const turn = (name: string, args: Record<string, unknown>) => ({
  toolCalls: [{ name, args }],
  usage,
  transientFailures: 0,
});
const final = { toolCalls: [], final: 'done', usage, transientFailures: 0 };
const v1 = versionedAgent('1');
const v2 = versionedAgent('2');
const label = (a: typeof v1) => `${a.version}/${a.tools.schemaHash}`;
const QUEUE = '/v1/operators/version-mismatches';
/** An operator of another tenant: sees none of acme's parked runs, counts none, acts on none. */
const BEA_TOKEN = 'bea-token-for-version-tests';

let h: Harness;
let url: string;
const contexts: EngineContext[] = [];

beforeAll(async () => {
  h = await createHarness('versions', {
    OPERATOR_TOKEN,
    VERSION_HEARTBEAT_MS: '100',
    VERSION_TTL_MS: '600',
    VERSION_HANDBACK_DELAY_MS: '10',
    APPROVAL_RULES: JSON.stringify([{ tool: 'legacy_send' }]),
    OPERATORS: JSON.stringify([
      {
        name: 'bea',
        tokenSha256: createHash('sha256').update(BEA_TOKEN).digest('hex'),
        role: 'operator',
        tenants: ['globex'],
      },
    ]),
  });
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
  for (const c of contexts) await c.close();
});

/** A worker (in this process) that loads one version of the agent, with its own context and metrics. */
async function versionWorker(
  agent: typeof v1,
  env: Record<string, string> = {},
): Promise<{ worker: FleetWorker; ctx: EngineContext }> {
  const cfg = loadConfig({ ...h.env, ...env });
  const ctx = await createContext(cfg, `versions-${agent.version}`, {
    agents: [agent],
    log: createLogger('versions', cfg.LOG_LEVEL),
    metrics: newMetrics(),
  });
  contexts.push(ctx);
  const worker = new (await import('../../src/worker/fleetWorker.js')).FleetWorker(ctx, {
    effects: createEffectRunner(ctx, { approvals: approvalPolicy(cfg.APPROVAL_RULES) }),
  });
  await worker.start();
  return { worker, ctx };
}

let seq = 0;
/** A run of the versioned agent pinned to `agent`'s version, created as the API would. */
async function createRun(agent: typeof v1, script: unknown[], tenant = 'acme'): Promise<string> {
  const id = `V-${++seq}-${Date.now()}`;
  const now = Date.now();
  const spec: RunSpec = {
    v: 2,
    runId: runIdFor(tenant, 'versioned', id),
    tenant,
    agent: 'versioned',
    key: id,
    input: { id },
    model: 'scripted',
    script,
    agentVersion: agent.version,
    toolsHash: agent.tools.schemaHash,
    limits: { maxSteps: 10, maxTokens: 10_000, maxWallMs: 60_000, deadlineAt: now + 60_000 },
    createdAt: now,
  };
  expect(await h.ctx.store.create(spec, now)).toBe(true);
  return spec.runId;
}

const counter = async (ctx: EngineContext, name: string, labels: Record<string, string> = {}) => {
  const values = (await ctx.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    .reduce((s, v) => s + v.value, 0);
};

describe('the version queue: a v1 run meets a v2-only worker', () => {
  let w2: { worker: FleetWorker; ctx: EngineContext };
  beforeAll(async () => {
    w2 = await versionWorker(v2);
  });
  afterAll(async () => {
    await w2.worker.stop(true);
  });

  it('parks version_mismatch (codes and versions only), listed with the served version, counted by the gauge; continue completes it under v2, journalled with who', async () => {
    const runId = await createRun(v1, [turn('lookup', { q: 'a' }), final]);
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toBe(
      `version_mismatch: pinned ${label(v1)} served ${label(v2)}`,
    );

    const listed = await call<{ total: number; runs: Record<string, unknown>[] }>(url, 'GET', QUEUE);
    expect(listed.status).toBe(200);
    expect(listed.body.runs).toEqual([
      expect.objectContaining({
        runId,
        agent: 'versioned',
        agentVersion: v1.version,
        toolsHash: v1.tools.schemaHash,
        step: 1,
        pinned: label(v1),
        served: [
          expect.objectContaining({
            agentVersion: v2.version,
            toolsHash: v2.tools.schemaHash,
            tools: ['lookup', 'note'],
            workers: 1,
          }),
        ],
      }),
    ]);
    await h.ctx.metrics.registry.metrics(); // the scrape runs the collectors
    expect(await counter(h.ctx, 'agent_version_parked_runs')).toBe(1);
    const runsFinished = await counter(w2.ctx, 'agent_runs_finished_total', {
      status: 'needs_human',
      reason: 'version_mismatch',
    });
    expect(runsFinished).toBeGreaterThanOrEqual(1);

    // A viewer-level request without credentials is refused; a bad body is a 400 naming the field, nothing written.
    expect((await call(url, 'GET', QUEUE, undefined, '')).status).toBe(401);
    const bad = await call<{ fields: { path: string }[] }>(url, 'POST', `${QUEUE}/${runId}/continue`, {
      agentVersion: 'versioned@2',
      toolsHash: 'XYZ',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.fields.map((f) => f.path)).toEqual(['toolsHash']);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/continue`, { agentVersion: 'versioned@9' })).body).toMatchObject(
      { error: 'version_not_served' },
    );
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('needs_human');

    // Another tenant's operator: the run is not listed, and acting on it is 404 like an unknown run.
    expect((await call<{ runs: unknown[] }>(url, 'GET', QUEUE, undefined, BEA_TOKEN)).body.runs).toEqual([]);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/continue`, {}, BEA_TOKEN)).status).toBe(404);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/cancel`, {}, BEA_TOKEN)).status).toBe(404);

    const cont = await call(url, 'POST', `${QUEUE}/${runId}/continue`, {});
    expect(cont).toMatchObject({
      status: 200,
      body: { runId, from: label(v1), to: label(v2), vanishedTools: [], operator: 'operator' },
    });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const spec = await h.ctx.store.readSpec(runId);
    expect(spec).toMatchObject({ agentVersion: v2.version, toolsHash: v2.tools.schemaHash });
    const ops = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'operator');
    expect(ops).toEqual([
      expect.objectContaining({
        action: 'continue_version',
        by: 'operator',
        step: 1,
        detail: `${label(v1)} -> ${label(v2)}`,
      }),
    ]);
    const events = (await readRunEvents(h.ctx, runId)).map((e) => e.type);
    expect(events).toContain('operator_action');

    // Out of the queue; a second continue changes nothing.
    expect((await call<{ runs: unknown[] }>(url, 'GET', QUEUE)).body.runs).toEqual([]);
    await h.ctx.metrics.registry.metrics();
    expect(await counter(h.ctx, 'agent_version_parked_runs')).toBe(0);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/continue`, {})).body).toMatchObject({
      error: 'not_version_parked',
    });
    expect(await counter(h.ctx, 'agent_version_decisions_total', { decision: 'continue' })).toBe(1);
  });

  it("continue keeps the limits an operator's retry extended: the continued step runs under them", async () => {
    const runId = await createRun(v1, [turn('lookup', { q: 'a' }), final]);
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    // What retryRun-17.lua leaves in the budget hash once a retry extended the run, here with a money cap of 1 µ$
    // that its spec does not have: a continued step under the extended limits stops before its model call.
    await h.ctx.redis.hset(h.ctx.keys.run(runId).budget, 'extensions', 1, 'maxSteps', 17, 'maxCost', 1);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/continue`, {})).status).toBe(200);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('budget_exceeded');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'reason')).toMatch(/^cost: /);
  });

  it('cancel: the run ends cancelled and leaves the queue; a run not in the queue is 409', async () => {
    const runId = await createRun(v1, [final]);
    expect(await h.waitForStatus(runId, ['needs_human', 'completed'])).toBe('needs_human');
    const res = await call(url, 'POST', `${QUEUE}/${runId}/cancel`, {});
    expect(res).toMatchObject({ status: 200, body: { runId, status: 'cancelled', operator: 'operator' } });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('cancelled');
    expect((await call<{ runs: unknown[] }>(url, 'GET', QUEUE)).body.runs).toEqual([]);
    expect((await call(url, 'POST', `${QUEUE}/${runId}/cancel`, {})).body).toMatchObject({
      error: 'not_version_parked',
    });
    expect(await counter(h.ctx, 'agent_version_decisions_total', { decision: 'cancel' })).toBe(1);
  });

  it("a tenant-scoped operator's total counts its tenants' parked runs only; an unscoped one's, every run", async () => {
    const acme = [await createRun(v1, [final]), await createRun(v1, [final]), await createRun(v1, [final])];
    const globex = [await createRun(v1, [final], 'globex'), await createRun(v1, [final], 'globex')];
    for (const r of [...acme, ...globex])
      expect(await h.waitForStatus(r, ['needs_human', 'completed'])).toBe('needs_human');
    type Page = { total: number; runs: { runId: string; tenant: string }[] };
    const all = await call<Page>(url, 'GET', QUEUE);
    expect(all.body.total).toBe(5);
    expect(all.body.runs.map((r) => r.runId).sort()).toEqual([...acme, ...globex].sort());
    // Bea (globex): her runs and their count, never the queue's whole size; past the page's limit, still her count.
    const bea = await call<Page>(url, 'GET', QUEUE, undefined, BEA_TOKEN);
    expect(bea.body.total).toBe(2);
    expect(bea.body.runs.map((r) => r.runId).sort()).toEqual([...globex].sort());
    const short = await call<Page>(url, 'GET', `${QUEUE}?limit=1`, undefined, BEA_TOKEN);
    expect(short.body).toMatchObject({ total: 2, runs: [{ tenant: 'globex' }] });
    expect((await call<Page>(url, 'GET', `${QUEUE}?limit=1`)).body.total).toBe(5);
    // Cleaned up for the tests after this one.
    for (const r of [...acme, ...globex])
      expect((await call(url, 'POST', `${QUEUE}/${r}/cancel`, {})).status).toBe(200);
    expect((await call<Page>(url, 'GET', QUEUE)).body.total).toBe(0);
  });
});

describe('the version queue from agentctl, the run page and the console', () => {
  let w2: { worker: FleetWorker; ctx: EngineContext };
  beforeAll(async () => {
    w2 = await versionWorker(v2);
  });
  afterAll(async () => {
    await w2.worker.stop(true);
  });
  const ctl = async (...args: string[]) => {
    const r = await agentctl(url)(...args);
    return { code: r.code, out: (r.out ? JSON.parse(r.out) : {}) as Record<string, unknown> };
  };

  it('agentctl versions list | continue | cancel', async () => {
    const [a, b] = [await createRun(v1, [final]), await createRun(v1, [final])];
    for (const r of [a, b]) expect(await h.waitForStatus(r, ['needs_human', 'completed'])).toBe('needs_human');
    const list = await ctl('versions', 'list');
    expect(list.code).toBe(0);
    expect((list.out.runs as { runId: string }[]).map((r) => r.runId).sort()).toEqual([a, b].sort());
    expect(await ctl('versions', 'continue', a, '--to', v2.version)).toMatchObject({
      code: 0,
      out: { runId: a, to: label(v2) },
    });
    expect(await ctl('versions', 'cancel', b)).toMatchObject({ code: 0, out: { runId: b, status: 'cancelled' } });
    expect(await ctl('versions', 'cancel', b)).toMatchObject({ code: 1, out: { error: 'not_version_parked' } });
    expect(await h.waitForStatus(a, ['completed', 'failed', 'needs_human'])).toBe('completed');
  });

  it('the run page names the queue; the console offers continue under each served version and cancel, and continues', async () => {
    const runId = await createRun(v1, [final]);
    expect(await h.waitForStatus(runId, ['needs_human', 'completed'])).toBe('needs_human');
    const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
    const page = await (await fetch(`${url}/runs/${runId}`, { headers: auth })).text();
    expect(page).toContain('id="version-queue"');
    expect(page).toContain(`agentctl versions continue|cancel ${runId}`);
    const consolePage = await (await fetch(`${url}/console/runs/${runId}`, { headers: auth })).text();
    expect(consolePage).toContain('id="version-change"');
    expect(consolePage).toContain(`continue under ${label(v2)}`);
    expect(consolePage).toContain('id="cancel-version"');
    const form = new URLSearchParams({ agentVersion: v2.version, toolsHash: v2.tools.schemaHash });
    const res = await fetch(`${url}/console/runs/${runId}/version/continue`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
      redirect: 'manual',
    });
    expect(res.status).toBeLessThan(400);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const entry = (await h.ctx.store.transcript(runId)).find((e) => e.kind === 'operator');
    expect(entry).toMatchObject({ action: 'continue_version', by: 'operator' });
  });
});

describe('tools whose names vanished in the new version', () => {
  /** A v1 run whose step 1 asks legacy_send (approval needed): parked waiting_approval by a v1 worker, which then leaves. */
  async function parkedUnderV1(): Promise<{ runId: string; actionId: string; fingerprint: string }> {
    const w1 = await versionWorker(v1);
    const runId = await createRun(v1, [turn('legacy_send', { to: 'x' }), turn('lookup', { q: 'b' }), final]);
    expect(await h.waitForStatus(runId, ['waiting_approval', 'completed', 'failed', 'needs_human'])).toBe(
      'waiting_approval',
    );
    await w1.worker.stop(true);
    const approvals = await call<{ approvals: { runId: string; actionId: string; fingerprint: string }[] }>(
      url,
      'GET',
      '/v1/approvals',
    );
    const a = approvals.body.approvals.find((x) => x.runId === runId)!;
    return { runId, actionId: a.actionId, fingerprint: a.fingerprint };
  }

  it('an unsettled action of a vanished tool: continue refused (409 naming it), cancel ends the run', async () => {
    const { runId, actionId, fingerprint } = await parkedUnderV1();
    const w2 = await versionWorker(v2);
    try {
      expect((await call(url, 'POST', `/v1/approvals/${actionId}`, { decision: 'approve', fingerprint })).status).toBe(
        200,
      );
      expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
      expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^version_mismatch: /);
      const refused = await call(url, 'POST', `${QUEUE}/${runId}/continue`, {});
      expect(refused).toMatchObject({
        status: 409,
        body: {
          error: 'unsettled_actions_of_vanished_tools',
          actions: [{ actionId, tool: 'legacy_send', state: 'authorized' }],
        },
      });
      expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('needs_human');
      expect((await call(url, 'POST', `${QUEUE}/${runId}/cancel`, {})).status).toBe(200);
      expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('cancelled');
    } finally {
      await w2.worker.stop(true);
    }
  });

  it('a settled one (rejected): continue records the vanished tool; the journalled call to it is answered with what its write came to, never dispatched', async () => {
    const { runId, actionId, fingerprint } = await parkedUnderV1();
    const w2 = await versionWorker(v2);
    try {
      expect((await call(url, 'POST', `/v1/approvals/${actionId}`, { decision: 'reject', fingerprint })).status).toBe(
        200,
      );
      expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
      const cont = await call(url, 'POST', `${QUEUE}/${runId}/continue`, {});
      expect(cont).toMatchObject({ status: 200, body: { vanishedTools: ['legacy_send'] } });
      expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
      const transcript = await h.ctx.store.transcript(runId);
      expect(transcript.find((e) => e.kind === 'operator' && e.action === 'continue_version')).toMatchObject({
        detail: `${label(v1)} -> ${label(v2)}; vanished tools: legacy_send`,
      });
      const obs = transcript.filter((e) => e.kind === 'observation' && e.tool === 'legacy_send');
      // Told the truth about its write (rejected by a person), not that the tool never existed.
      expect(obs.at(-1)).toMatchObject({ status: 'rejected', actionId });
      const ledger = await h.ctx.redis.hget(h.ctx.keys.action(runId, actionId), 'state');
      expect(ledger).toBe('rejected');
    } finally {
      await w2.worker.stop(true);
    }
  });
});

describe('hand-back while another live worker serves the version', () => {
  it('the v2 worker hands a v1 step back (counted) while v1 is announced, and parks it once the announcement is withdrawn', async () => {
    const w2 = await versionWorker(v2);
    const registry = new VersionRegistry(h.ctx.redis, h.ctx.keys, 60_000);
    const ghost = {
      worker: 'elsewhere:1',
      version: v1.version,
      toolsHash: v1.tools.schemaHash,
      tools: ['lookup', 'legacy_send'],
      shards: [0],
    };
    try {
      await registry.announce('versioned', ghost);
      const runId = await createRun(v1, [final]);
      await until(
        'three hand-backs',
        10_000,
        async () => (await counter(w2.ctx, 'agent_version_handbacks_total', { agent: 'versioned' })) >= 3,
      );
      expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('queued');
      expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'decidedStep')).toBe('0');
      await registry.withdraw('versioned', ghost);
      expect(await h.waitForStatus(runId, ['needs_human', 'completed'])).toBe('needs_human');
      // A hand-back is no attempt: the job was started several times and made one attempt (the park's commit).
      const job = await h.ctx.queues.forRun(runId).getJob(`${runId}.s1`);
      expect(job?.attemptsStarted).toBeGreaterThanOrEqual(4);
      expect(job?.attemptsMade).toBe(1);
    } finally {
      await registry.withdraw('versioned', ghost);
      await w2.worker.stop(true);
    }
  });
});

describe("a live worker of the version that does not consume the run's shard does not serve it", () => {
  it('parks at once (WORKER_SHARDS are announced with the versions)', async () => {
    const w2 = await versionWorker(v2);
    const registry = new VersionRegistry(h.ctx.redis, h.ctx.keys, 60_000);
    const elsewhere = {
      worker: 'elsewhere:2',
      version: v1.version,
      toolsHash: v1.tools.schemaHash,
      tools: ['lookup', 'legacy_send'],
      shards: [7],
    };
    try {
      await registry.announce('versioned', elsewhere);
      const runId = await createRun(v1, [final]);
      expect(await h.waitForStatus(runId, ['needs_human', 'completed'])).toBe('needs_human');
      expect((await h.ctx.store.readState(runId))?.reason).toBe(
        `version_mismatch: pinned ${label(v1)} served ${label(v2)}`,
      );
      expect(await counter(w2.ctx, 'agent_version_handbacks_total')).toBe(0);
      // Cleaned up for the tests after this one.
      expect((await call(url, 'POST', `${QUEUE}/${runId}/cancel`, {})).status).toBe(200);
    } finally {
      await registry.withdraw('versioned', elsewhere);
      await w2.worker.stop(true);
    }
  });
});

describe('configuration', () => {
  it('WORKER_AGENT_VERSIONS naming a version no loaded agent has stops the worker at boot, naming the field', () => {
    const cfg = loadConfig({ ...h.env, WORKER_AGENT_VERSIONS: 'versioned@3' });
    expect(
      () => new VersionGate(new AgentCatalog([v2]), new VersionRegistry(h.ctx.redis, h.ctx.keys, 1000), cfg, h.ctx.log),
    ).toThrow(/WORKER_AGENT_VERSIONS: versioned@3 is the version of no loaded agent/);
    expect(() => loadConfig({ ...h.env, VERSION_HEARTBEAT_MS: '1000', VERSION_TTL_MS: '1500' })).toThrow(
      /VERSION_TTL_MS/,
    );
  });
});
