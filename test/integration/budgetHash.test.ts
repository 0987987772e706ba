/**
 * A run's budget hash keeps the counters every step's commit increments (stepsUsed, tokensUsed, contextBytes) at its
 * start: a small hash is one listpack, and each HINCRBY searches it from the start for its field, twice. The limits
 * follow, and every field keeps its value.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';

let h: Harness;
beforeEach(async () => {
  h = await createHarness('budgethash');
});
afterEach(async () => {
  await h.close();
});

it('writes the used counters first, then the limits', async () => {
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('BH-1') }, Date.now());
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  const budget = h.ctx.keys.run(spec.runId).budget;
  const fields = await h.ctx.redis.hkeys(budget);
  expect(new Set(fields.slice(0, 3))).toEqual(new Set(['stepsUsed', 'tokensUsed', 'contextBytes']));
  const all = await h.ctx.redis.hgetall(budget);
  expect(all).toMatchObject({
    stepsUsed: '0',
    tokensUsed: '0',
    contextBytes: '0',
    maxSteps: String(spec.limits.maxSteps),
  });
  expect(Object.keys(all).length).toBeGreaterThan(3);
  expect(await h.ctx.redis.object('ENCODING', budget)).toBe('listpack');
});
