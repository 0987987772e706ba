/** agentctl against the real API: list approvals, approve one, see the run finish. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../../../testkit/harness.js';
import { final, OPERATOR_TOKEN, operatorHarness, refund, startScripted, turn } from './support.js';

const run = promisify(execFile);
let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('cli');
});
afterAll(async () => {
  await h.close();
});

const ctl = async (...args: string[]) => {
  try {
    const { stdout } = await run(process.execPath, [
      '--import',
      'tsx',
      'src/server/agentctl.ts',
      ...args,
      '--url',
      h.url,
      '--token',
      OPERATOR_TOKEN,
    ]);
    return { code: 0, out: stdout, err: '' };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: e.stdout, err: e.stderr };
  }
};

describe('agentctl', () => {
  it('lists and approves an approval', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'CLI');
    await h.waitForStatus(runId, ['waiting_approval']);
    const list = await ctl('approvals');
    expect(list.code).toBe(0);
    const pending = (
      JSON.parse(list.out) as { approvals: { actionId: string; runId: string; fingerprint: string }[] }
    ).approvals.find((p) => p.runId === runId)!;
    expect((await ctl('approve', pending.actionId, '--fingerprint', 'bad', '--as', 'cli')).code).toBe(1);
    const ok = await ctl('approve', pending.actionId, '--fingerprint', pending.fingerprint, '--as', 'cli');
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
      ['approve', 'a_x:history', '--fingerprint', 'f', '--as', 'cli'],
    ]) {
      const r = await ctl(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(/malformed/);
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
  });
});
