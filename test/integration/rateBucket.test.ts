/**
 * The model rate bucket's script (rateReserve-2.lua) on real Redis: a call whose clock reads earlier than the
 * bucket's last refill (another process, or a settle that read its clock after a later reserve) must not move the
 * refill time back, or the same interval is refilled twice and the fleet sends more than its limit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { rateReserve, rateSettle } from '../../src/store/calls/rateReserve.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('ratebucket');
});
afterAll(async () => {
  await h.close();
});

describe('the rate bucket', () => {
  it('an operation with an earlier clock refills nothing twice', async () => {
    const k = h.ctx.keys.rateBucket('test/clock');
    // One request a second, holding one: the first reservation empties it.
    const limits = { rpm: 60, tpm: 0, burstMs: 1000 };
    const t0 = 1_000_000;
    expect(await rateReserve(h.ctx.redis, k, limits, t0 + 1000, 1)).toBe(0);
    // A settle whose clock was read a second earlier.
    await rateSettle(h.ctx.redis, k, limits, t0, 1, 1);
    // At the same instant as the reservation, nothing has refilled: a second's wait.
    expect(await rateReserve(h.ctx.redis, k, limits, t0 + 1000, 1)).toBe(1000);
    expect(await rateReserve(h.ctx.redis, k, limits, t0 + 2000, 1)).toBe(0);
  });
});
