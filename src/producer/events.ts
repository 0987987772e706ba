/**
 * POST /v1/events {tenant, agent, key, payload, eventId?}: an outside event for a run of `agent` waiting on `key` (a
 * wait tool's `{ kind: 'event', key, timeoutMs }`). Keys are the agent's: two agents of a tenant that name the same
 * key never take each other's deliveries. One script on the key (deliverEvent-2.lua) gives the payload to the wait
 * that holds the key, at most once: a second delivery before the wait consumed the first is refused
 * (409 duplicate_delivery), so two deliveries resume the run once. A delivery on a key no run waits on is kept for
 * EVENT_KEEP_MS, and the first wait on the key takes it at once; so is one after the wait consumed an earlier one
 * (a sender's retry without an `eventId`). With an `eventId`, the same id again within EVENT_ID_TTL_MS is answered
 * as the first time and delivers nothing.
 *
 * Bounded: a payload over EVENT_PAYLOAD_MAX_BYTES is refused (413), and a tenant's kept deliveries are capped in
 * count and bytes (EVENT_KEPT_MAX_PER_TENANT, EVENT_KEPT_MAX_BYTES_PER_TENANT; 429): a sender cannot fill the memory
 * every tenant's runs live in. Room is reserved before a delivery is kept and given back when it is not kept after
 * all; a process that dies in between holds the room until the keep would have ended.
 *
 * After the script, the run's wake job (delayed until the wait's timeout) is promoted so the run resumes
 * now. If the process dies in between, the wake job still finds the delivery when it fires at the timeout:
 * late, never lost, never twice.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { EngineContext } from '../runs/engineContext.js';
import { eventKeySchema } from '../runs/spec.js';
import { agentNameSchema, tenantSchema } from './schemas.js';
import { releaseIfHolderEnded } from '../runs/waits.js';
import { deliverEvent, deliverUnlessHeld, type DeliverReply } from '../store/calls/deliverEvent.js';
import { releaseKept, reserveKept } from '../store/calls/keptQuota.js';
import { stepJobId } from '../store/keys.js';
import { promoteIfDelayed } from '../store/queues.js';

export const eventBodySchema = z
  .object({
    /** The tenant, the agent and the key name the stored keys: each is checked against its format before any write. */
    tenant: tenantSchema,
    /** The agent whose run waits on the key (keys are per agent). */
    agent: agentNameSchema,
    /** The key a run waits on (as its wait tool named it, in the same format). */
    key: eventKeySchema,
    /** What the waiting call gets as its result (`{ event: payload }`). */
    payload: z.unknown(),
    /** The sender's id of this event: the same id again (a retry) is answered as the first time, nothing delivered. */
    eventId: eventKeySchema.optional(),
  })
  .strict()
  .meta({ id: 'EventDelivery' });
export type EventBody = z.infer<typeof eventBodySchema>;

/** A delivery refused by a limit: nothing was written. */
export type EventRefusal =
  | { kind: 'too_large'; limit: 'EVENT_PAYLOAD_MAX_BYTES'; max: number; bytes: number }
  | {
      kind: 'kept_limit';
      limit: 'EVENT_KEPT_MAX_PER_TENANT' | 'EVENT_KEPT_MAX_BYTES_PER_TENANT';
      max: number;
      retryAfterMs: number;
    };

/** Delivers one event; promotes the resumed run's wake job. */
export async function deliver(
  ctx: EngineContext,
  body: EventBody,
  now = Date.now(),
): Promise<DeliverReply | EventRefusal> {
  const payload = JSON.stringify(body.payload ?? null);
  const bytes = Buffer.byteLength(payload);
  const max = ctx.cfg.EVENT_PAYLOAD_MAX_BYTES;
  if (bytes > max)
    return refused(ctx, 'payload_size', { kind: 'too_large', limit: 'EVENT_PAYLOAD_MAX_BYTES', max, bytes });
  // To a wait first: only a delivery that no wait takes is kept, in the tenant's room.
  const r = await deliverOn(ctx, body, payload, now, 0, body.eventId, false);
  if (r.kind !== 'no_wait') return r;
  const quota = ctx.keys.keptDeliveries(body.tenant);
  const reservation = { id: randomUUID(), bytes };
  const room = await reserveKept(ctx.redis, quota, reservation, {
    endsAt: now + ctx.cfg.EVENT_KEEP_MS,
    maxCount: ctx.cfg.EVENT_KEPT_MAX_PER_TENANT,
    maxBytes: ctx.cfg.EVENT_KEPT_MAX_BYTES_PER_TENANT,
    now,
  });
  if (room.kind !== 'ok') {
    const count = room.kind === 'count';
    return refused(ctx, count ? 'kept_count' : 'kept_bytes', {
      kind: 'kept_limit',
      limit: count ? 'EVENT_KEPT_MAX_PER_TENANT' : 'EVENT_KEPT_MAX_BYTES_PER_TENANT',
      max: count ? ctx.cfg.EVENT_KEPT_MAX_PER_TENANT : ctx.cfg.EVENT_KEPT_MAX_BYTES_PER_TENANT,
      retryAfterMs: Math.max(1000, room.oldestEndsAt - now),
    });
  }
  const kept = await deliverOn(ctx, body, payload, now, ctx.cfg.EVENT_KEEP_MS, body.eventId);
  if (kept.kind !== 'kept' || kept.seen) await releaseKept(ctx.redis, quota, reservation);
  return kept;
}

function refused(ctx: EngineContext, reason: string, r: EventRefusal): EventRefusal {
  ctx.metrics.waits.inc({ kind: 'event', outcome: `delivery_refused_${reason}` });
  ctx.log.warn({ code: 'event_delivery_refused', reason, limit: r.limit, max: r.max }, 'event delivery refused');
  return r;
}

/**
 * Delivers one event only if a wait holds its key (an agent's webhook, src/producer/webhooks.ts): `resumed`, or
 * `no_wait` with nothing written, and the caller handles the event otherwise (it starts a run). Nothing is kept:
 * an event that no wait takes is never left on a key where no run may ever look for it. The same `eventId` again
 * after its delivery answers `resumed` again: a retry after an error that hid the delivery never starts a run.
 */
export async function deliverToWait(
  ctx: EngineContext,
  body: Omit<EventBody, 'eventId'>,
  eventId: string,
  now = Date.now(),
): Promise<DeliverReply> {
  return deliverOn(ctx, body, JSON.stringify(body.payload ?? null), now, 0, eventId);
}

/** One delivery on the agent's key; a wait on it whose run has ended is released first (releaseIfHolderEnded). */
async function deliverOn(
  ctx: EngineContext,
  body: Pick<EventBody, 'tenant' | 'agent' | 'key'>,
  payload: string,
  now: number,
  keepMs: number,
  eventId: string | undefined,
  countNoWait = true,
): Promise<DeliverReply> {
  const key = ctx.keys.eventKey(body.tenant, body.agent, body.key);
  const keys = { event: key, eventId: ctx.keys.eventIdRecord(key, eventId ?? '') };
  const args = { payload, now, keepMs, eventId, eventIdTtlMs: ctx.cfg.EVENT_ID_TTL_MS };
  // A key no wait holds (most events) is answered in one request; a held one only after its holder's run is checked.
  const first = await deliverUnlessHeld(ctx.redis, keys, args);
  let r: DeliverReply;
  if (first.kind === 'held') {
    await releaseIfHolderEnded(ctx, key);
    r = await deliverEvent(ctx.redis, keys, args);
  } else r = first;
  // A first try of POST /v1/events that no wait takes is counted by the second, which keeps it.
  if (r.kind === 'no_wait' && !countNoWait) return r;
  ctx.metrics.waits.inc({ kind: 'event', outcome: 'seen' in r ? 'delivery_seen' : `delivery_${r.kind}` });
  if (r.kind === 'resumed' && !('seen' in r)) await promoteWake(ctx, r.runId, r.waitId);
  return r;
}

/** The wake job of the wait `<runId>:<step>:<callId>` is step+1's job: run now instead of at the timeout. */
async function promoteWake(ctx: EngineContext, runId: string, waitId: string): Promise<void> {
  const step = Number(waitId.slice(runId.length + 1).split(':', 1)[0]);
  try {
    const job = await ctx.queues.forRun(runId).getJob(stepJobId(runId, step + 1));
    // Promoted already by the worker that added it (it saw this delivery): nothing left to do.
    if (job) await promoteIfDelayed(job);
  } catch (err) {
    // Not promoted: the wake job finds the delivery when it fires at the wait's timeout.
    ctx.log.warn({ code: 'wake_promote_failed', runId, err }, 'wake job not promoted');
  }
}
