/** Typed call of src/store/lua/approvalDecide-4.lua: one atomic claim of a pending approval. */
import type { RedisClient } from '../connect.js';
import { ScriptCode, scriptError } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ApprovalDecideKeys {
  action: string;
  history: string;
  /** The shard's approvals zset. */
  approvals: string;
  run: string;
}

export interface ApprovalDecideArgs {
  actionId: string;
  decision: 'approve' | 'reject';
  /** '' for the expiry sweep (no check). */
  fingerprint: string;
  by: string;
  now: number;
  why: string;
}

/**
 * decided | already_decided (an earlier claim stands) | expired | void (the run has finished), each with the
 * stored decision (JSON); fingerprint_mismatch (nothing changed); conflict with the action's state (not planned, no
 * decision).
 */
export type ApprovalDecideReply =
  | { outcome: 'decided' | 'already_decided' | 'expired' | 'void'; decision: string }
  | { outcome: 'fingerprint_mismatch' }
  | { outcome: 'conflict'; state: string };

const OUTCOMES = { 1: 'decided', 2: 'already_decided', 3: 'expired', 4: 'void' } as const;

export async function approvalDecide(
  redis: RedisClient,
  k: ApprovalDecideKeys,
  a: ApprovalDecideArgs,
): Promise<ApprovalDecideReply> {
  const [code, body] = (await script(redis, 'approvalDecide')(
    k.action,
    k.history,
    k.approvals,
    k.run,
    a.actionId,
    a.decision,
    a.fingerprint,
    a.by,
    a.now,
    a.why,
  )) as [number, string];
  if (code === ScriptCode.FingerprintMismatch) return { outcome: 'fingerprint_mismatch' };
  if (code === ScriptCode.StateMismatch) return { outcome: 'conflict', state: body };
  const outcome = OUTCOMES[code as keyof typeof OUTCOMES];
  if (!outcome) throw scriptError(code, { actionId: a.actionId });
  return { outcome, decision: body };
}
