/** Typed call of src/store/lua/ledgerTransition-6.lua: a ledger record's compare-and-set move. */
import type { RedisClient } from '../connect.js';
import { ScriptCode, scriptError } from '../codes.js';
import { script } from '../luaScripts.js';

export interface LedgerTransitionKeys {
  action: string;
  history: string;
  openActions: string;
  humanQueue: string;
  events: string;
  /** The run's hash (its cancelRequested flag). */
  run: string;
}

export interface LedgerTransitionArgs {
  actionId: string;
  from: string;
  to: string;
  now: number;
  history: unknown;
  /** Fields to set with the move (strings). */
  set: Record<string, string>;
  /** The move is a dispatch attempt. */
  countAttempt: boolean;
  eventsMaxLen: number;
  event: string;
  /** Refuse the move when the run's cancel is recorded (checked in the same atomic change). */
  unlessCancelled: boolean;
  /**
   * The run's retention at its end (retentionAtEnd): a move that ends the last wait of an ended run held for a person
   * lets the run go with it (includes/expireRun.lua). Omitted: nothing is let go here.
   */
  retentionMs?: number | undefined;
}

/** `moved`, or `conflict` with the state found (someone else moved first). Any other refusal throws its typed error. */
export type LedgerTransitionReply = { moved: true } | { moved: false; actual: string };

export async function ledgerTransition(
  redis: RedisClient,
  k: LedgerTransitionKeys,
  a: LedgerTransitionArgs,
): Promise<LedgerTransitionReply> {
  const [code, actual, cancelReason] = (await script(redis, 'ledgerTransition')(
    k.action,
    k.history,
    k.openActions,
    k.humanQueue,
    k.events,
    k.run,
    a.from,
    a.to,
    a.now,
    JSON.stringify(a.history),
    JSON.stringify(a.set),
    a.countAttempt ? 1 : 0,
    a.actionId,
    a.eventsMaxLen,
    a.event,
    a.unlessCancelled ? 1 : 0,
    a.retentionMs ?? '',
  )) as [number, string, string?];
  if (code === 1) return { moved: true };
  if (code === ScriptCode.StateMismatch) return { moved: false, actual };
  throw scriptError(code, {
    actionId: a.actionId,
    from: a.from,
    to: a.to,
    actual,
    ...(cancelReason !== undefined ? { cancelReason } : {}),
  });
}
