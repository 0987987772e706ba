/**
 * Typed call of src/store/lua/ledgerPlan-7.lua: look an action up by id, or plan it (record + SET NX reservation),
 * only where the run's journal holds the decision that asked for it.
 */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface LedgerPlanKeys {
  action: string;
  history: string;
  /** The reservation of the action's idempotency key. */
  reservation: string;
  /** The run's set of action ids. */
  runActions: string;
  events: string;
  /** The run's hash and journal: where the decision the action follows must be. */
  run: string;
  journal: string;
}

export interface LedgerPlanArgs {
  actionId: string;
  /** The record's fields, all strings. */
  fields: Record<string, string>;
  history: unknown;
  step: number;
  callId: string;
  eventsMaxLen: number;
  /** The `effect` event (JSON) published when the action is planned. */
  event: string;
  /**
   * sha1 of the journalled decision entry that asked for the action (decisionDigest); undefined for an action planned
   * outside a step (an operator's compensation).
   */
  decision?: string | undefined;
}

/**
 * 'repeat': the same write asked again from another step or call (a loop signal). `actionId`: the action the call has,
 * the one asked for or the one the same call (step and call id) planned before under another id (its tool's `identity`
 * changed in between).
 */
export type LedgerPlanReply = {
  status: 'new' | 'existing' | 'repeat';
  state: string;
  repeats: number;
  actionId: string;
};

/**
 * Throws the typed error of -13 (the reservation is held by another action) and the FenceError of -24 (the server
 * does not hold the decision: nothing planned, the action must not leave).
 */
export async function ledgerPlan(redis: RedisClient, k: LedgerPlanKeys, a: LedgerPlanArgs): Promise<LedgerPlanReply> {
  const res = await script(redis, 'ledgerPlan')(
    k.action,
    k.history,
    k.reservation,
    k.runActions,
    k.events,
    k.run,
    k.journal,
    a.actionId,
    JSON.stringify(a.fields),
    JSON.stringify(a.history),
    a.step,
    a.callId,
    a.eventsMaxLen,
    a.event,
    a.decision ?? '',
  );
  const [status, state, repeats, actionId] = expectReply(res, { actionId: a.actionId }) as [
    LedgerPlanReply['status'],
    string,
    number,
    string,
  ];
  return { status, state, repeats: Number(repeats), actionId };
}
