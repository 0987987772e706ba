/**
 * Flow control and a run parked for approval: the park gives its slot back (the tenant holds none while a
 * person decides); the approval resumes it and re-admits it with one slot, given back when it ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../testkit/harness.js';
import { call, final, operatorHarness, refund, startScripted, turn } from './operators/support.js';
import { until } from '../../testkit/until.js';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('flowapproval', { FLOW_CONTROL: 'true' });
});
afterAll(async () => {
  await h.close();
});

const heldCount = async () => Number((await h.ctx.redis.hget(h.ctx.keys.flow().counts, 't:acme')) ?? 0);

/** The release follows the park's commit (the status is written first): wait for it. */
async function heldBecomes(n: number): Promise<number> {
  await until(`${n} slots held`, 5000, async () => (await heldCount()) === n);
  return heldCount();
}

describe('flow control and an approval park', () => {
  it('parked: no slot; approved: one slot while it works; ended: none', async () => {
    const reads = Array.from({ length: 8 }, () => turn([{ name: 'read_ticket', args: {} }]));
    const runId = await startScripted(h, [turn([refund(10_000)]), ...reads, final], 'FA');
    await h.ctx.admission!.hold({ runId, tenant: 'acme', agent: 'support' }, Date.now());
    expect(await heldCount()).toBe(1);
    expect(await h.waitForStatus(runId, ['waiting_approval'])).toBe('waiting_approval');
    expect(await heldBecomes(0)).toBe(0);
    const list = await call<{ approvals: { actionId: string; runId: string; fingerprint: string }[] }>(
      h.url,
      'GET',
      '/v1/approvals',
    );
    const p = list.body.approvals.find((a) => a.runId === runId)!;
    const ok = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: p.fingerprint,
      approver: 'alice',
    });
    expect(ok.status).toBe(200);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('running');
    expect(await heldCount()).toBe(1);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    expect(await heldBecomes(0)).toBe(0);
  }, 30_000);
});
