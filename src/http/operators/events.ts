/**
 * GET /v1/runs/:id/events: the run's Redis stream as Server-Sent Events (a run past Redis's retention: its events as
 * the archive holds them, then the end).
 * Viewers hold no Redis connection of their own: one reader per process and
 * shard fans entries out (eventFanout.ts). Each principal has a share of the
 * process's viewers and operators a reserve (viewerShares.ts); a viewer past
 * a limit gets 503 naming it (`limit`: the setting). Each event's id is its SSE id: the stream entry id, or
 * `<entry id>.<index>` for an event of an entry holding several (src/store/runEvents.ts), so a client that
 * reconnects with Last-Event-ID continues after the last event it saw, each event once, even from the middle
 * of an entry. The response ends after a terminal status_changed event, telling the client to come back no sooner
 * than ENDED_RETRY_MS (an EventSource reconnects on its own when a response ends, a browser within ~3 s).
 * Any token that may read the run may follow it (a tenant token: its own runs).
 */
import { Router, type Request, type Response } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import { requireRunAccess, runNotFound, type Principal, type SessionReader } from '../auth.js';
import { EventFanout, type Viewer, type ViewerSink } from './eventFanout.js';
import { readStatus } from '../../store/runRecord.js';
import { ViewerShares, type ViewerLimit, type ViewerShareLimits, type ViewerSlot } from './viewerShares.js';
import { param, singleQuery } from '../../producer/fieldErrors.js';
import { isTerminal, type RunStatus } from '../../core/status.js';
import {
  eventOfId,
  isAfter,
  parseEventId,
  STREAM_START,
  type EventPosition,
  type RunEvent,
} from '../../store/runEvents.js';

/**
 * The reconnection delay (SSE `retry:`) a stream sends before it ends for a run that has ended. A browser's
 * EventSource reopens every ended stream, by default within a few seconds, for as long as its page is open: each time
 * a viewer slot and a read of the run's events. Not a 204, which would stop it for good: a run ended for now may be
 * retried by an operator, and an open page then follows it again within this delay.
 */
export const ENDED_RETRY_MS = 30_000;

/**
 * The reconnection delay a stream of a run at work sends first: a client told ENDED_RETRY_MS by an earlier stream of
 * the run (it was retried since) comes back this soon again when this one is cut.
 */
export const LIVE_RETRY_MS = 3_000;

/** The block that tells a client to reconnect no sooner than ENDED_RETRY_MS (it names no event). */
const ENDED_RETRY = `retry: ${ENDED_RETRY_MS}\n\n`;

export interface EventsOptions {
  /** Keep-alive period; each one also checks the run's status. */
  blockMs?: number;
  /** Live viewers this process serves at once (default SSE_MAX_VIEWERS). */
  maxViewers?: number;
}

const REFUSALS: Record<ViewerLimit, (l: ViewerShareLimits) => string> = {
  SSE_MAX_VIEWERS_PER_PRINCIPAL: (l) =>
    `this credential already holds ${l.perPrincipal} live event streams in this process (SSE_MAX_VIEWERS_PER_PRINCIPAL)`,
  SSE_OPERATOR_RESERVE: (l) =>
    `the ${l.maxViewers - l.operatorReserve} live event streams open to tenants are taken; ` +
    `${l.operatorReserve} are kept for operators (SSE_OPERATOR_RESERVE)`,
  SSE_MAX_VIEWERS: (l) => `this process serves at most ${l.maxViewers} live event streams (SSE_MAX_VIEWERS)`,
};

const MAX_OF: Record<ViewerLimit, (l: ViewerShareLimits) => number> = {
  SSE_MAX_VIEWERS_PER_PRINCIPAL: (l) => l.perPrincipal,
  SSE_OPERATOR_RESERVE: (l) => l.maxViewers - l.operatorReserve,
  SSE_MAX_VIEWERS: (l) => l.maxViewers,
};

/**
 * A slot for the request's principal (set by requireRunAccess), held until the response closes, or the 503 naming
 * the limit it hit, counted and logged.
 */
function takeSlot(ctx: EngineContext, shares: ViewerShares, res: Response, runId: string): ViewerSlot | undefined {
  const p = res.locals.principal as Principal;
  const slot = shares.admit(p);
  if (typeof slot !== 'string') {
    ctx.metrics.sseViewers.inc({ principal: p.role });
    res.once('close', () => {
      slot.release();
      ctx.metrics.sseViewers.dec({ principal: p.role });
    });
    return slot;
  }
  ctx.metrics.sseViewersRefused.inc({ limit: slot, principal: p.role });
  ctx.log.info({ code: 'sse_viewer_refused', limit: slot, principal: p.role, runId }, 'event stream viewer refused');
  res.setHeader('retry-after', '5');
  res.status(503).json({
    error: 'too_many_viewers',
    limit: slot,
    max: MAX_OF[slot](shares.limits),
    message: REFUSALS[slot](shares.limits),
  });
  return undefined;
}

/**
 * Where the viewer resumes: after the event its `Last-Event-ID` header (else its `lastEventId` query) names, or the
 * stream's start. A malformed one is the name it came by, checked here before it reaches Redis; null once a repeated
 * `lastEventId` was answered 400.
 */
function startAt(req: Request, res: Response): EventPosition | 'Last-Event-ID' | 'lastEventId' | null {
  const header = req.header('last-event-id');
  const query = header === undefined ? singleQuery(req, res, 'lastEventId') : undefined;
  if (query === null) return null;
  const [given, name] =
    header !== undefined ? [header, 'Last-Event-ID' as const] : [query ?? '', 'lastEventId' as const];
  if (given === '') return STREAM_START;
  return parseEventId(given) || name;
}

export function eventsRouter(ctx: EngineContext, opts: EventsOptions = {}, session?: SessionReader): Router {
  const r = Router();
  const maxViewers = opts.maxViewers ?? ctx.cfg.SSE_MAX_VIEWERS;
  const shares = new ViewerShares({
    maxViewers,
    perPrincipal: ctx.cfg.SSE_MAX_VIEWERS_PER_PRINCIPAL,
    operatorReserve: Math.min(ctx.cfg.SSE_OPERATOR_RESERVE, maxViewers - 1),
  });
  const fanout = new EventFanout(ctx.redis, ctx.keys, ctx.log, { blockMs: opts.blockMs ?? 10_000, maxViewers });
  r.get('/v1/runs/:id/events', requireRunAccess(ctx, session), async (req, res) => {
    const runId = param(req.params.id);
    const last = startAt(req, res);
    if (last === null) return;
    if (typeof last === 'string')
      return void res.status(400).json({
        error: 'invalid_request',
        fields: [
          {
            path: last,
            message: 'an event id like 1700000000000-0 or 1700000000000-0.2 (each part of the entry id at most 2^64-1)',
          },
        ],
      });
    if (!(await ctx.store.exists(runId))) {
      // Past Redis's retention: the events as archived, after the position, then the end (the run has ended).
      const archived = await ctx.archive?.details(runId);
      if (!archived) return void runNotFound(res);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (const e of archived.events) {
        const event = eventOfId(e);
        if (event && isAfter(event, last)) writeEvent(res, event);
      }
      return void res.end(ENDED_RETRY);
    }
    // No await from the check to the slot: the caps are exact. The slot goes when the response closes.
    if (!takeSlot(ctx, shares, res, runId)) return;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${LIVE_RETRY_MS}\n\n`);

    let ending = false;
    let draining = false;
    // Assigned once it has joined, below; the close handlers above that line read it first.
    // eslint-disable-next-line prefer-const
    let viewer: Viewer | undefined;
    let gone = false;
    res.on('close', () => {
      gone = true;
      viewer?.leave();
    });
    /** `ended`: the run has ended (or is gone), so the client is told to come back later, not at once. */
    const end = (ended: boolean) => {
      ending = true;
      viewer?.leave();
      if (!res.writableEnded) res.end(ended ? ENDED_RETRY : undefined);
    };
    const sink: ViewerSink = {
      write(events: RunEvent[]) {
        if (ending) return;
        for (const e of events) {
          writeEvent(res, e);
          if (e.type === 'status_changed' && isTerminal(safeStatus(e.data))) return void end(true);
        }
      },
      idle(status) {
        if (ending || draining) return;
        if (status !== null && !isTerminal(status)) return void res.write(': keep-alive\n\n');
        // Finished or gone: whatever the stream still holds for this viewer, then the end.
        draining = true;
        void viewer
          ?.drain()
          .catch(() => {})
          .finally(() => end(true));
      },
      fail(err) {
        if (!ending) ctx.log.warn({ code: 'sse_read_failed', runId, err }, 'event stream read failed');
        end(false);
      },
    };
    viewer = await fanout.join(runId, last, sink);
    if (!viewer) {
      return void res.end(); // not reached: the slot was checked synchronously above
    }
    if (ending || gone) return void viewer.leave();
    // Caught up: a run that has ended (a client asking after its terminal status, whether an operator retried it
    // since) is told so now, not at the next keep-alive: its stream ends here with what it still holds.
    let status: RunStatus | null;
    try {
      status = (await readStatus(ctx.redis, ctx.keys, runId)) ?? null;
    } catch {
      return; // Redis unreachable: the next keep-alive asks again
    }
    if (status === null || isTerminal(status)) sink.idle(status);
  });
  return r;
}

/** One event as SSE: its id (the resume point), its type, its data (a line each). */
function writeEvent(res: Response, e: Pick<RunEvent, 'id' | 'type' | 'data'>): void {
  res.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${e.data.replace(/\n/g, '\ndata: ')}\n\n`);
}

function safeStatus(data: string): string {
  try {
    const status = (JSON.parse(data || '{}') as { status?: unknown }).status;
    return typeof status === 'string' ? status : '';
  } catch {
    return '';
  }
}
