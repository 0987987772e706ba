/**
 * POST /v1/events {tenant, key, payload}: an outside event for a run waiting on `key` (a wait tool's
 * `{ kind: 'event', key, timeoutMs }`). One script on the key (deliverEvent-1.lua) gives the payload to
 * the wait that holds the key, at most once: a second delivery before the wait consumed the first is
 * refused (409 duplicate_delivery), so two deliveries resume the run once. A delivery on a key no run
 * waits on yet is kept for EVENT_KEEP_MS, and the first wait on the key takes it at once.
 *
 * After the script, the run's wake job (delayed until the wait's timeout) is promoted so the run resumes
 * now. If the process dies in between, the wake job still finds the delivery when it fires at the timeout:
 * late, never lost, never twice.
 */
import { z } from 'zod';
import type { EngineContext } from '../runs/engineContext.js';
import { deliverEvent, type DeliverReply } from '../store/calls/deliverEvent.js';
import { stepJobId } from '../store/keys.js';

export const eventBodySchema = z
  .object({
    tenant: z.string().min(1).max(63),
    /** The key a run waits on (as its wait tool named it). */
    key: z.string().min(1).max(200),
    /** What the waiting call gets as its result (`{ event: payload }`). */
    payload: z.unknown(),
  })
  .strict()
  .meta({ id: 'EventDelivery' });
export type EventBody = z.infer<typeof eventBodySchema>;

/** Delivers one event; promotes the resumed run's wake job. */
export async function deliver(ctx: EngineContext, body: EventBody, now = Date.now()): Promise<DeliverReply> {
  return deliverOn(ctx, body, now, ctx.cfg.EVENT_KEEP_MS);
}

/**
 * Delivers one event only if a wait holds its key (an agent's webhook, src/producer/webhooks.ts): `resumed`, or
 * `no_wait` with nothing written, and the caller handles the event otherwise (it starts a run). Nothing is kept:
 * an event that no wait takes is never left on a key where no run may ever look for it. The same `eventId` again
 * after its delivery answers `resumed` again: a retry after an error that hid the delivery never starts a run.
 */
export async function deliverToWait(
  ctx: EngineContext,
  body: EventBody,
  eventId: string,
  now = Date.now(),
): Promise<DeliverReply> {
  return deliverOn(ctx, body, now, 0, eventId);
}

async function deliverOn(
  ctx: EngineContext,
  body: EventBody,
  now: number,
  keepMs: number,
  eventId?: string,
): Promise<DeliverReply> {
  const payload = JSON.stringify(body.payload ?? null);
  const key = ctx.keys.eventKey(body.tenant, body.key);
  const r = await deliverEvent(ctx.redis, key, { payload, now, keepMs, eventId });
  ctx.metrics.waits.inc({ kind: 'event', outcome: `delivery_${r.kind}` });
  if (r.kind === 'resumed') await promoteWake(ctx, r.runId, r.waitId);
  return r;
}

/** The wake job of the wait `<runId>:<step>:<callId>` is step+1's job: run now instead of at the timeout. */
async function promoteWake(ctx: EngineContext, runId: string, waitId: string): Promise<void> {
  const step = Number(waitId.slice(runId.length + 1).split(':', 1)[0]);
  try {
    const job = await ctx.queues.forRun(runId).getJob(stepJobId(runId, step + 1));
    if (job && (await job.isDelayed())) await job.promote();
  } catch (err) {
    // Promoted meanwhile by the worker that added it (it saw this delivery): nothing left to do.
    if (jobNotInState(err)) return;
    // Not promoted: the wake job finds the delivery when it fires at the wait's timeout.
    ctx.log.warn({ code: 'wake_promote_failed', runId, err }, 'wake job not promoted');
  }
}

/** BullMQ's refusal to promote a job that is no longer delayed (its ErrorCode.JobNotInState, -3). */
function jobNotInState(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === -3;
}
