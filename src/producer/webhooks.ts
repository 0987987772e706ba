/**
 * Signed webhooks that start runs: each agent's `intake.webhooks` (src/core/agent.ts) mounted at
 * POST /webhooks/<name>, tenant from `?tenant=` or the path (/webhooks/<name>/<tenant>), per-tenant secret from
 * WEBHOOK_SECRETS.
 *
 * Order at the edge: signature over the raw bytes -> the hook's strict body schema -> the hook names the event and
 * the input (and maybe a delivery: a wait key of the hook's agent and its payload) -> event-id dedupe (SET NX, 24 h;
 * per tenant, agent and hook: another hook's event of the same id is another event) -> the delivery to
 * a run waiting on the key, if one is (src/producer/events.ts: the run resumes, 202, no run starts) -> else startRun. The event id is the run's intake event: the agent's key
 * is the subject, so a later event on the same subject starts a follow-up run linked to the subject's latest run,
 * while the same event twice is one run (the run id derives from tenant, agent, key and event). startRun is
 * idempotent on the event anyway, so if the process dies after the dedupe record and before the run exists, the
 * sender's retry is answered `duplicate` with the run id while the run may be missing: the dedupe record is
 * therefore deleted when startRun fails, and written with the run id it is for.
 *
 * An event's identity comes only from what the signature covers: a hook sees the body and its raw bytes, never a
 * header, which anyone replaying a captured request could change. The dedupe record outlives the replay window
 * (twice the tolerance), so a signed request is refused as stale before its record can expire.
 *
 * These routes need the raw body, so they are mounted before the API's JSON parser (see src/http/fullApi.ts).
 */
import { randomBytes } from 'node:crypto';
import express, { Router, type Response } from 'express';
import type { z } from 'zod';
import type { Agent, WebhookIntake } from '../core/agent.js';
import { TENANT_NAME_FORMAT } from '../core/tenant.js';
import type { EngineContext } from '../runs/engineContext.js';
import { EVENT_KEY_FORMAT } from '../runs/spec.js';
import { BODY_LIMIT, bodyIllFormed, bodyTooDeep, illFormedStringPath, nestedDeeperThan } from './bodyLimits.js';
import { deliverToWait, eventBodySchema } from './events.js';
import { foundRun, InvalidRunRequest, resolveRequest, specOf, startSpec, type ResolvedRequest } from './intake.js';
import { answerJson, invalid, param, singleQuery } from './fieldErrors.js';
import { checkSignature, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './webhookSignature.js';
import { agentSafeParse } from '../core/agentCode.js';
import { ownValue } from '../core/ownValue.js';

const EVENT_TTL_MS = 24 * 3600_000;

type Parsed =
  | { ok: true; eventId: string; input: unknown; delivery: Delivery | undefined }
  | { ok: false; error: z.ZodError }
  | { ok: false; json: false }
  | { ok: false; deep: true }
  | { ok: false; illFormed: string }
  | { ok: false; badEventId: true }
  | { ok: false; badDeliveryKey: true };

type Delivery = { key: string; payload: unknown };

const NOT_JSON = Symbol('not JSON');
const TOO_DEEP = Symbol('too deep');

function parseJson(raw: Buffer): unknown {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    return NOT_JSON;
  }
  if (nestedDeeperThan(body)) return TOO_DEEP;
  const illFormed = illFormedStringPath(body);
  return illFormed === undefined ? body : new IllFormed(illFormed);
}

class IllFormed {
  constructor(readonly path: string) {}
}

function unparsed(body: unknown): Parsed | undefined {
  if (body === NOT_JSON) return { ok: false, json: false };
  if (body === TOO_DEEP) return { ok: false, deep: true };
  if (body instanceof IllFormed) return { ok: false, illFormed: body.path };
  return undefined;
}

/** How long an event id is remembered: a day, and never less than the window in which its signature is fresh. */
export function eventTtlMs(toleranceS: number): number {
  return Math.max(EVENT_TTL_MS, 2 * toleranceS * 1000);
}

/** The body read by the hook's schema, then its event and input; an event id the store cannot key is a 400. */
function parseWith(hook: WebhookIntake<unknown>, raw: Buffer): Parsed {
  const body = parseJson(raw);
  const refused = unparsed(body);
  if (refused) return refused;
  const p = agentSafeParse(hook.body, body);
  if (!p.success) return { ok: false, error: p.error };
  const { id, input, delivery } = hook.event(p.data, raw);
  if (!EVENT_KEY_FORMAT.test(id)) return { ok: false, badEventId: true };
  if (delivery && !eventBodySchema.shape.key.safeParse(delivery.key).success)
    return { ok: false, badDeliveryKey: true };
  return { ok: true, eventId: id, input, delivery };
}

/** The secret an unknown tenant's request is checked against: made at start, held by nobody. */
const UNHELD_SECRET = randomBytes(32).toString('base64');

export function webhooksRouter(ctx: EngineContext, now: () => number = Date.now): Router {
  const r = Router();
  const raw = express.raw({ type: () => true, limit: BODY_LIMIT });

  const handle =
    (name: string, agent: Agent, hook: WebhookIntake<unknown>) => async (req: express.Request, res: Response) => {
      const asked = param(req.params.tenant) || singleQuery(req, res, 'tenant');
      if (asked === null) return;
      const tenant = asked ?? '';
      // Own keys only: `constructor` or `toString` must not find Object.prototype's (a function is no secret).
      const secret = TENANT_NAME_FORMAT.test(tenant) ? ownValue(ctx.cfg.WEBHOOK_SECRETS, tenant) : undefined;
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      // A tenant without a secret is checked against one nobody holds, so its answer (and the time it takes) is a
      // configured tenant's with a wrong signature: the answers do not tell a caller which tenants exist. The log
      // says which it was.
      const check = checkSignature(
        secret ?? UNHELD_SECRET,
        req.header(SIGNATURE_HEADER),
        req.header(TIMESTAMP_HEADER),
        body,
        now(),
        ctx.cfg.WEBHOOK_TOLERANCE_S,
      );
      if (check !== 'ok' || secret === undefined) {
        const reason = check === 'ok' ? 'bad_signature' : check;
        ctx.log.warn({ code: `webhook_${secret === undefined ? 'unknown_tenant' : check}`, tenant }, 'webhook refused');
        return void res.status(401).json({ error: 'invalid_signature', reason });
      }
      const parsed = parseWith(hook, body);
      if (!parsed.ok) {
        if ('json' in parsed)
          return void res
            .status(400)
            .json({ error: 'invalid_json', fields: [{ path: '(body)', message: 'body is not valid JSON' }] });
        if ('deep' in parsed) return void bodyTooDeep(res);
        if ('illFormed' in parsed) return void bodyIllFormed(res, parsed.illFormed);
        if ('badEventId' in parsed) return void refuseEventId(res);
        if ('badDeliveryKey' in parsed) return void refuseDeliveryKey(res);
        return void invalid(res, parsed.error);
      }
      // Read once: its run id names the event's record, and the same reading starts the run below.
      let resolved: ResolvedRequest;
      try {
        resolved = resolveRequest(ctx, { tenant, agent: agent.name, input: parsed.input }, parsed.eventId);
      } catch (err) {
        if (err instanceof InvalidRunRequest)
          return void res.status(400).json({ error: 'invalid_request', fields: err.fields });
        throw err;
      }
      // Per hook and agent: two hooks' senders number their events independently.
      const key = ctx.keys.webhookEvent(tenant, agent.name, name, parsed.eventId);
      const { runId } = resolved;
      const first = await ctx.redis.set(key, runId, 'PX', eventTtlMs(ctx.cfg.WEBHOOK_TOLERANCE_S), 'NX');
      if (first === null) {
        const previous = (await ctx.redis.get(key)) ?? runId;
        return void answerJson(res, 200, { ...(await foundRun(ctx, previous)), duplicate: true });
      }
      try {
        // A retry after an error here finds the same delivery (by the event id), never a second handling.
        const delivered =
          parsed.delivery &&
          (await deliverToWait(
            ctx,
            { tenant, agent: agent.name, ...parsed.delivery },
            `${name}/${parsed.eventId}`,
            now(),
          ));
        if (delivered?.kind === 'resumed') {
          // The event is the waiting run's now: its record names that run, so a redelivery answers it.
          await ctx.redis.set(key, delivered.runId, 'PX', eventTtlMs(ctx.cfg.WEBHOOK_TOLERANCE_S));
          return void answerJson(res, 202, { runId: delivered.runId, created: false, duplicate: false, resumed: true });
        }
        const at = now();
        const started = await startSpec(ctx, specOf(ctx, resolved, at, parsed.eventId), undefined, at);
        if (started.created) return void answerJson(res, 201, { ...started, duplicate: false });
        // The event's run was made already (its record deleted when a handling failed after making it): found, as a
        // redelivery finds it.
        answerJson(res, 200, { ...(await foundRun(ctx, started.runId)), duplicate: false });
      } catch (err) {
        await ctx.redis.del(key);
        if (err instanceof InvalidRunRequest)
          return void res.status(400).json({ error: 'invalid_request', fields: err.fields });
        throw err;
      }
    };

  for (const [name, { agent, hook }] of ctx.agents.webhooks) {
    r.post(`/webhooks/${name}`, raw, handle(name, agent, hook));
    r.post(`/webhooks/${name}/:tenant`, raw, handle(name, agent, hook));
  }
  return r;
}

/** The hook named an event the store cannot key: the sender's body is at fault, so a 400, never a 500. */
function refuseEventId(res: Response): void {
  res.status(400).json({
    error: 'invalid_request',
    fields: [{ path: '(event id)', message: '1 to 200 visible ASCII characters, no spaces' }],
  });
}

/** The hook named a wait key the store cannot hold (as POST /v1/events would refuse it): a 400, never a 500. */
function refuseDeliveryKey(res: Response): void {
  res.status(400).json({
    error: 'invalid_request',
    fields: [{ path: '(delivery key)', message: '1 to 200 visible ASCII characters, no spaces' }],
  });
}
