/**
 * The example agent (examples/lead-qualifier), loaded by configuration
 * (AGENTS_MODULE) into the stock processes, unmodified: a real API process
 * and real worker processes. A run is created through the HTTP API and runs to
 * completion; a worker SIGKILLed around its write is recovered by another
 * worker with exactly one deal at the CRM. A broken AGENTS_MODULE stops boot
 * with one line naming it.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { killAll, spawnApi, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { spawnModule } from '../../testkit/spawnModule.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { runIdFor } from '../../src/store/keys.js';
import { startCrm, type CrmHandle } from '../../examples/lead-qualifier/crm.js';

const AGENTS_MODULE = 'examples/lead-qualifier/index.ts';
let h: Harness;
let crm: CrmHandle;
const children: ChildProcess[] = [];

beforeEach(async () => {
  h = await createHarness('example', { RECONCILE_DEADLINE_MS: '2000', RECONCILE_POLL_MS: '50' });
  crm = await startCrm();
});
afterEach(async () => {
  killAll(children);
  await crm.close();
  await h.close();
});

const exampleEnv = (extra: Record<string, string> = {}) => ({ ...h.env, AGENTS_MODULE, CRM_URL: crm.url, ...extra });

async function startApiProcess(): Promise<string> {
  const api = await spawnApi(exampleEnv());
  children.push(api.child);
  return api.url;
}

async function worker(extra: Record<string, string> = {}): Promise<WorkerProcess> {
  const w = await spawnWorker(exampleEnv(extra));
  children.push(w.child);
  return w;
}

async function post(api: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${api}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const lead = (leadId: string) => ({ leadId, company: 'Acme Corp', email: 'buyer@acme.example' });

describe('the example agent, loaded by AGENTS_MODULE into the stock api and worker processes', () => {
  it('runs end to end through the HTTP API: input validated by its schema, one deal, the run view names the agent', async () => {
    const api = await startApiProcess();
    const refused = await post(api, {
      tenant: 'acme',
      agent: 'lead-qualifier',
      input: { ...lead('L-BAD'), email: 'not-an-email' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.fields).toEqual([{ path: 'input.email', message: expect.any(String) }]);
    expect(await h.ctx.store.exists(runIdFor('acme', 'lead-qualifier', 'L-BAD'))).toBe(false);
    // The support agent is not in this deployment: its shorthand names the missing agent.
    const support = await post(api, { tenant: 'acme', ticket: { id: 'T-1' } });
    expect(support.status).toBe(400);

    const created = await post(api, { tenant: 'acme', agent: 'lead-qualifier', input: lead('L-1') });
    expect(created.status).toBe(201);
    const runId = created.body.runId as string;
    expect(runId).toBe(runIdFor('acme', 'lead-qualifier', 'L-1'));
    expect((await post(api, { tenant: 'acme', agent: 'lead-qualifier', input: lead('L-1') })).body).toMatchObject({
      runId,
      created: false,
    });

    await worker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    expect(crm.deals()).toEqual([
      { id: 'deal_1', leadId: 'L-1', company: 'Acme Corp', tier: 'enterprise', amountCents: 5_000_000 },
    ]);
    const view = (await (await fetch(`${api}/v1/runs/${runId}`, { headers: producerAuth })).json()) as {
      agent: { name: string; agentVersion: string };
      key: string;
      effects: { tool: string; state: string; receipt?: string }[];
      transcript: { kind: string }[];
    };
    expect(view.agent).toMatchObject({ name: 'lead-qualifier', agentVersion: 'lead-qualifier@1' });
    expect(view.key).toBe('L-1');
    expect(view.effects).toEqual([
      expect.objectContaining({ tool: 'create_deal', state: 'confirmed', receipt: 'deal_1' }),
    ]);
    expect(view.transcript.filter((e) => e.kind === 'decision')).toHaveLength(3);
  });

  // [crash point at step 2 (the deal), deals at the CRM when the worker died, a state the recovered action passed through]
  const cases: [string, number, string][] = [
    ['after_dispatched', 0, 'safe_retry'],
    ['after_call', 1, 'outcome_unknown'],
  ];
  for (const [point, atDeath, via] of cases) {
    it(`a worker SIGKILLed ${point} while opening the deal: another worker finishes the run, one deal`, async () => {
      const api = await startApiProcess();
      const created = await post(api, { tenant: 'acme', agent: 'lead-qualifier', input: lead(`L-${point}`) });
      expect(created.status).toBe(201);
      const runId = created.body.runId as string;
      const victim = await worker({ CRASH_POINTS: `${point}@2`, LOCK_DURATION_MS: '1000', STALLED_INTERVAL_MS: '500' });
      expect((await victim.exited).signal).toBe('SIGKILL');
      expect(crm.deals()).toHaveLength(atDeath);

      await worker();
      expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
      expect(crm.deals()).toHaveLength(1);
      const [action] = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
      expect(action).toMatchObject({ tool: 'create_deal', state: 'confirmed', receipt: 'deal_1' });
      expect(action!.history.map((x) => x.to)).toContain(via);
      const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
      expect(decisions).toEqual([1, 2, 3]);
    });
  }
});

describe('a broken AGENTS_MODULE stops boot with one line naming it', () => {
  const bootLine = async (module: string, env: Record<string, string> = {}) => {
    const child = spawnModule(
      'src/server/worker',
      { ...h.env, AGENTS_MODULE: module, WORKER_METRICS_PORT: '0', ...env },
      ['ignore', 'pipe', 'pipe'],
    );
    children.push(child);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('close', r));
    return { code, lines: stderr.trimEnd().split('\n') };
  };

  it('a module that does not exist, and one whose settings do not parse (no CRM_URL)', async () => {
    const [missing, failing] = await Promise.all([
      bootLine('examples/nowhere/index.ts'),
      bootLine(AGENTS_MODULE, { CRM_URL: '' }),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.lines).toEqual([
      expect.stringMatching(/^worker: cannot start: AGENTS_MODULE=examples\/nowhere\/index\.ts: cannot be loaded/),
    ]);
    expect(failing.code).toBe(1);
    expect(failing.lines).toEqual([
      expect.stringMatching(
        /^worker: cannot start: invalid configuration: CRM_URL: required \(the CRM the lead-qualifier calls\)/,
      ),
    ]);
  });
});
