/**
 * Open actions as the reconciler's sweep finds them: a send_email left `dispatched` by an owner that is gone, and run
 * ids of one shard (the sweep walks a shard's index oldest first).
 */
import type { WriteTool } from '../../src/core/tool.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { supportTool, type Harness } from '../../testkit/harness.js';

const emailArgs = (to: string) => ({ to, template: 'ack', subject: 'Re', body: 'On it.' });

/** A send_email action of `runId` left `dispatched`, inside Resend's key window; its action id. */
export async function dispatchedEmail(h: Harness, ledger: Ledger, runId: string, to: string): Promise<string> {
  const tool = supportTool(h.ctx, 'send_email') as WriteTool;
  const id = actionIdentity(runId, tool, emailArgs(to));
  await ledger.plan(runId, 1, 'c1', tool.name, id, emailArgs(to), 'test');
  await ledger.transition(runId, id.actionId, 'planned', 'authorized', { by: 'test', why: 'setup' });
  await ledger.transition(
    runId,
    id.actionId,
    'authorized',
    'dispatched',
    { by: 'test', why: 'setup' },
    { replayUntil: String(Date.now() + 3600_000) },
  );
  return id.actionId;
}

/** `n` run ids of `shard`, from `prefix`. */
export function runIdsIn(h: Harness, shard: number, prefix: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (h.ctx.keys.shardOf(`${prefix}-${i}`) === shard) out.push(`${prefix}-${i}`);
  return out;
}
