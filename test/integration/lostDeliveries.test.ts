/**
 * A worker SIGKILLed while its model call is in flight leaves no trace of that call, whichever delivery it is; the
 * provider got the request and bills it. The next delivery of the job (the owner watch moved it back, counting a stall)
 * charges each lost delivery one attempt's estimate before its pre-flight (chargeLostDeliveries-4.lua), so a kill loop
 * is stopped by the run's money cap, not only by its deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startOpenAIServer } from '../../testkit/modelServers/openai.js';
import type { ModelServer } from '../../testkit/modelServers/queue.js';
import { killSpawned, spawnWorker } from '../../testkit/processes.js';
import { until } from '../../testkit/until.js';
import { buildSpec } from '../../src/producer/intake.js';
import { readBudget } from '../../src/store/runRecord.js';
import { isTerminal } from '../../src/core/status.js';

let h: Harness;
let openai: ModelServer;
beforeAll(async () => {
  openai = await startOpenAIServer();
  h = await createHarness('lost-deliveries', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o',
    COMPLETION_TOKEN_CAP: '1024',
    LOCK_DURATION_MS: '20000',
  });
}, 60_000);
afterAll(async () => {
  await killSpawned();
  await h?.close();
  await openai?.close();
});

describe('deliveries lost during the model call', () => {
  it('a kill loop is charged an estimate per lost call and stopped by the run cap', async () => {
    // Every request is held (never answered) until the run stops: each worker is killed with its call in flight.
    openai.fallback = { kind: 'hold' };
    // One attempt's cost estimate is about 12,500 µ$ (the completion cap alone is 10,240 at gpt-4o's $10/M out):
    // three fit under 40,000, a fourth not.
    const maxCost = 40_000;
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('LOST-1'), agent: { model: 'openai' }, budget: { maxCost } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const ended = async () => isTerminal((await h.ctx.store.readState(spec.runId))!.status);
    let kills = 0;
    while (kills < 8) {
      const w = await spawnWorker(h.env, { startTimeoutMs: 60_000 });
      await until(
        `request ${kills + 1} or the stop`,
        60_000,
        async () => openai.requests.length > kills || ended(),
        20,
      );
      const inFlight = openai.requests.length > kills;
      w.child.kill('SIGKILL');
      await w.exited;
      if (!inFlight) break;
      kills++;
    }
    const state = (await h.ctx.store.readState(spec.runId))!;
    const b = await readBudget(h.ctx.redis, h.ctx.keys, spec.runId, ['costUsed', 'tokensUsed']);
    expect(state.status).toBe('budget_exceeded');
    const [, used, estimate] = /^cost: used (\d+) \+ estimate (\d+) > cap 40000 µ\$$/.exec(state.reason) ?? [];
    expect(kills).toBe(3);
    expect(openai.requests.length).toBe(3);
    // Each lost call charged one estimate (at least the completion cap, in tokens and at the output price), once.
    expect(b.costUsed).toBe(kills * Number(estimate));
    expect(Number(used)).toBe(b.costUsed);
    expect(b.tokensUsed).toBeGreaterThanOrEqual(kills * 1024);
    expect(b.tokensUsed % kills).toBe(0);
  }, 300_000);
});
