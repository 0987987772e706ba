/**
 * The triage agent's hand-off to a person: a write tool that opens a task in the team's help desk, a ticket on
 * Zendesk's ticket API (`POST /api/v2/tickets.json`) tagged for the people who decide refunds. In development the
 * bundled sandbox speaks that wire (SANDBOX_URL); point DESK_URL at `https://{subdomain}.zendesk.com` for the real
 * desk.
 *
 * Once per ticket, whatever happens: the action's identity is the customer's ticket, the request carries the
 * ledger's idempotency key and the action id as `external_id`. Zendesk keeps a key 2 hours and answers a same-key,
 * same-body request with the ticket it created (`x-idempotency-lookup: hit`), so a lost answer is settled by sending
 * the identical request again inside that window (`replay_same_key`); past it a person decides.
 */
import { z } from 'zod';
import { defineWriteTool, httpJson, KeyConflictError, OutcomeUnknownError, TerminalError } from '../../src/index.js';

/** Zendesk keeps an Idempotency-Key 2 hours. */
const DESK_KEY_WINDOW_MS = 2 * 3600_000;

export interface DeskOptions {
  /** The desk's base URL (no trailing slash): `https://{subdomain}.zendesk.com`, or the sandbox's. */
  baseUrl: string;
  /** An OAuth access token of the desk (sent as Bearer). */
  token: string;
}

export const handToPersonArgs = z
  .object({
    ticketId: z.string().min(1).max(100),
    orderId: z.string().min(1).max(100),
    amountCents: z.number().int().positive().max(10_000_00),
    /** Why a person must decide, in one line (what the refunds agent said, or that it stopped). */
    why: z.string().min(1).max(500),
  })
  .strict();

/** Opens the task; its receipt is the desk's ticket id. */
export function handToPerson(desk: DeskOptions) {
  return defineWriteTool({
    name: 'hand_to_person',
    description: 'Hand the refund to a person: opens a task in the help desk for the refunds team.',
    args: handToPersonArgs,
    // One task per customer ticket, whatever words the model chose for `why`.
    identity: (a) => ({ ticketId: a.ticketId }),
    service: { enforcesKey: true, reconcile: { kind: 'replay_same_key', windowMs: DESK_KEY_WINDOW_MS } },
    async dispatch(args, _ctx, req) {
      const res = await httpJson(`${desk.baseUrl}/api/v2/tickets.json`, {
        method: 'POST',
        headers: { authorization: `Bearer ${desk.token}`, 'idempotency-key': req.idempotencyKey },
        body: {
          ticket: {
            subject: `Refund for a person to decide: ticket ${args.ticketId}, order ${args.orderId}`,
            comment: { body: `${args.amountCents} cents. ${args.why}`, public: false },
            external_id: req.actionId,
            priority: 'high',
            tags: ['refund', 'needs_person'],
          },
        },
        timeoutMs: req.timeoutMs,
        signal: req.signal,
      });
      const id = (res.body as { ticket?: { id?: unknown } } | undefined)?.ticket?.id;
      if ((res.status === 201 || res.status === 200) && typeof id === 'number') {
        const receipt = String(id);
        return { receipt, output: { taskId: receipt }, replayed: res.headers.get('x-idempotency-lookup') === 'hit' };
      }
      if (res.status === 201 || res.status === 200)
        throw new OutcomeUnknownError('the desk answered without a ticket id');
      const code = (res.body as { error?: unknown } | undefined)?.error;
      if (res.status === 400 && code === 'IdempotentRequestError')
        throw new KeyConflictError('the desk holds this key for another task', { status: res.status });
      // The desk is still working on the same key: the outcome is not known yet.
      if (res.status === 409)
        throw new OutcomeUnknownError('the desk is processing this key', { reason: 'in_progress' });
      throw new TerminalError('invalid_input', `the desk refused the task (${res.status})`, { status: res.status });
    },
  });
}
