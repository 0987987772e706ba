/** agentctl against the real API: list approvals, approve one, see the run finish; `--as` refused, not ignored. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../../testkit/harness.js';
import { agentctl, final, operatorHarness, refund, startScripted, turn } from './support.js';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('cli');
});
afterAll(async () => {
  await h.close();
});

const ctl = (...args: string[]) => agentctl(h.url)(...args);

describe('agentctl', () => {
  it('lists and approves an approval', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'CLI');
    await h.waitForStatus(runId, ['waiting_approval']);
    const list = await ctl('approvals');
    expect(list.code).toBe(0);
    const pending = (
      JSON.parse(list.out) as { approvals: { actionId: string; runId: string; fingerprint: string }[] }
    ).approvals.find((p) => p.runId === runId)!;
    expect((await ctl('approve', pending.actionId, '--fingerprint', 'bad')).code).toBe(1);
    const ok = await ctl('approve', pending.actionId, '--fingerprint', pending.fingerprint);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ decision: 'approve', approver: 'operator', alreadyDecided: false });
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    expect(h.sandbox.counts().byResource.refunds.records).toBe(1);
  });

  it('refuses a malformed run or action id before any request', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'CLI');
    await h.waitForStatus(runId, ['waiting_approval']);
    for (const args of [
      ['cancel', `${runId}:journal`],
      ['run', `${runId}}`],
      ['events', `${runId}:events`],
      ['approve', 'a_x:history', '--fingerprint', 'f'],
    ]) {
      const r = await ctl(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(/malformed/);
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
  });

  it("refuses --as (the API records the token's operator, never a name given) and decides nothing", async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'CLI');
    await h.waitForStatus(runId, ['waiting_approval']);
    const list = JSON.parse((await ctl('approvals')).out) as {
      approvals: { actionId: string; runId: string; fingerprint: string }[];
    };
    const pending = list.approvals.find((p) => p.runId === runId)!;
    for (const resolve of [
      ['approve', pending.actionId, '--fingerprint', pending.fingerprint, '--as', 'alice'],
      ['resolve', pending.actionId, 'confirmed', '--as=alice'],
    ]) {
      const r = await ctl(...resolve);
      expect(r.code, resolve.join(' ')).toBe(2);
      expect(r.err).toContain('--as is not accepted');
      expect(r.out).toBe('');
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
  });
});
