/**
 * A tenant's daily money limit under a kill loop: three worker processes, one SIGKILLed at random and replaced
 * every ~1.5 s while a dozen runs of one tenant spend past the day's limit (TENANT_DAILY_COST). Each model attempt
 * draws its cost estimate before the call from its worker's lease, counted on the day in one script
 * (src/budget/spend.ts), and settles its real cost after, in its worker's next batch; an attempt whose worker died,
 * or whose settlement died unsent with it, keeps its draw (never less than what it cost), and a dead worker's
 * undrawn lease stays counted. Checked afterwards from Redis:
 * every run ended, the limit stopped some of them before their call (reason naming the cost), the tenant's day
 * never went past the limit (the estimate bounds each attempt's real cost here), and what the runs were charged
 * (their costUsed) is within the tenant's day. The loop is bounded: 20 s of kills, then a drain.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import {
  killSpawned,
  spawnApi,
  spawnWorker,
  type SpawnedProcess,
  type WorkerProcess,
} from '../../testkit/processes.js';
import { readBudget } from '../../src/store/runRecord.js';

const RUNS = 12;
const CHAOS_MS = 20_000;
const KILL_EVERY_MS = 1500;
/** µ$: at the scripted model's nominal price a step costs 700 µ$, a run 3,500 µ$: the day holds about five runs. */
const DAILY = 20_000;
const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];
const usage = { promptTokens: 500, completionTokens: 100 };
const script = [
  ...Array.from({ length: 4 }, () => ({ toolCalls: [{ name: 'read_ticket', args: {} }], usage })),
  { toolCalls: [], final: 'done', usage },
];

let h: Harness;
let api: SpawnedProcess & { url: string };
const workers = new Set<WorkerProcess>();

beforeAll(async () => {
  h = await createHarness('money-kill', { TENANT_DAILY_COST: String(DAILY), STUCK_RUN_MIN_AGE_MS: '500' });
  api = await spawnApi(h.env);
}, 120_000);
afterAll(async () => {
  await killSpawned(); // replacements still starting too
  await h?.close();
});

async function addWorker(): Promise<void> {
  const w = await spawnWorker(h.env, { startTimeoutMs: 60_000 });
  workers.add(w);
  void w.exited.then(() => workers.delete(w));
}

async function startRun(i: number): Promise<string> {
  const res = await fetch(`${api.url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `money-kill-${i}`, ...producerAuth },
    body: JSON.stringify({ tenant: 'spender', ticket: sampleTicket(`MK-${i}`), agent: { model: 'scripted', script } }),
  });
  expect([200, 201]).toContain(res.status);
  return ((await res.json()) as { runId: string }).runId;
}

describe("a tenant's daily money limit under a kill loop", () => {
  it('holds across three workers SIGKILLed at random', async () => {
    await Promise.all([addWorker(), addWorker(), addWorker()]);
    const ids: string[] = [];
    const chaosEnd = Date.now() + CHAOS_MS;
    let kills = 0;
    let starting = 0;
    for (let i = 0; Date.now() < chaosEnd; i++) {
      if (ids.length < RUNS) ids.push(await startRun(ids.length));
      await new Promise((r) => setTimeout(r, KILL_EVERY_MS)); // the kill loop's pace: the behaviour under test
      const victim = [...workers][Math.floor(Math.random() * workers.size)];
      if (victim) {
        victim.child.kill('SIGKILL');
        workers.delete(victim);
        kills++;
      }
      // Replacements boot in the background: kills go on.
      for (let n = workers.size + starting; n < 3; n++) {
        starting++;
        void addWorker().finally(() => starting--);
      }
    }
    while (ids.length < RUNS) ids.push(await startRun(ids.length));
    await until('a worker up', 60_000, () => workers.size > 0, 100);
    const statuses = await Promise.all(ids.map((id) => h.waitForStatus(id, ENDED, 90_000)));
    expect(statuses.every((s) => s === 'completed' || s === 'budget_exceeded')).toBe(true);
    const stopped = await Promise.all(
      ids.filter((_, i) => statuses[i] === 'budget_exceeded').map((id) => h.ctx.store.readState(id)),
    );
    expect(stopped.length).toBeGreaterThan(0);
    for (const s of stopped)
      expect(s!.reason).toMatch(/^cost: spender \(tenant today\) used \d+ \+ estimate \d+ > 20000 µ\$$/);
    const day = new Date().toISOString().slice(0, 10);
    const tenantDay = Number(
      await h.ctx.redis.get(h.ctx.keys.spend('spender', 'support', day, day.slice(0, 7)).tenantDay),
    );
    const charged = (await Promise.all(ids.map((id) => readBudget(h.ctx.redis, h.ctx.keys, id, ['costUsed'])))).reduce(
      (n, b) => n + b.costUsed,
      0,
    );
    // The bound: the day never passes its limit while each attempt costs no more than its estimate (here: always).
    expect(tenantDay).toBeLessThanOrEqual(DAILY);
    expect(charged).toBeLessThanOrEqual(tenantDay);
    expect(charged).toBeGreaterThan(0);
    // Replacements take seconds to boot on a loaded machine: a kill lands whenever one is up.
    expect(kills).toBeGreaterThanOrEqual(3);
  }, 180_000);
});
