/**
 * GET /v1/runs/:id/events: the run's Redis stream as Server-Sent Events.
 * Viewers hold no Redis connection of their own: one reader per process and
 * shard fans entries out (eventFanout.ts), and past SSE_MAX_VIEWERS a viewer
 * gets 503 naming the limit. Stream ids are the SSE ids, so a client that
 * reconnects with Last-Event-ID continues after the last event it saw, each
 * event once. The response ends after a terminal status_changed event.
 * Any token that may read the run may follow it (a tenant token: its own runs).
 */
import { Router, type Request } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import { requireRunAccess, runNotFound, type SessionReader } from '../auth.js';
import { EventFanout, type StreamEntry, type Viewer } from './eventFanout.js';
import { param } from '../../producer/fieldErrors.js';
import { isTerminal } from '../../runs/status.js';

const STREAM_ID = /^\d+-\d+$/;

export interface EventsOptions {
  /** Keep-alive period; each one also checks the run's status. */
  blockMs?: number;
  /** Live viewers this process serves at once (default SSE_MAX_VIEWERS). */
  maxViewers?: number;
}

function startId(req: Request): string | undefined {
  const given =
    req.header('last-event-id') ?? (typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined);
  if (given === undefined || given === '') return '0-0';
  return STREAM_ID.test(given) ? given : undefined;
}

export function eventsRouter(ctx: EngineContext, opts: EventsOptions = {}, session?: SessionReader): Router {
  const r = Router();
  const maxViewers = opts.maxViewers ?? ctx.cfg.SSE_MAX_VIEWERS;
  const fanout = new EventFanout(ctx.redis, ctx.keys, ctx.log, { blockMs: opts.blockMs ?? 10_000, maxViewers });
  r.get('/v1/runs/:id/events', requireRunAccess(ctx, session), async (req, res) => {
    const runId = param(req.params.id);
    const last = startId(req);
    if (last === undefined)
      return void res.status(400).json({
        error: 'invalid_request',
        fields: [{ path: 'Last-Event-ID', message: 'a stream id like 1700000000000-0' }],
      });
    if (!(await ctx.store.exists(runId))) return runNotFound(res);
    // No await from here to join(), which takes the slot: the cap is exact.
    if (fanout.viewers >= maxViewers) {
      res.setHeader('retry-after', '5');
      return void res.status(503).json({
        error: 'too_many_viewers',
        limit: maxViewers,
        message: `this process serves at most ${maxViewers} live event streams (SSE_MAX_VIEWERS)`,
      });
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();

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
    const end = () => {
      ending = true;
      viewer?.leave();
      if (!res.writableEnded) res.end();
    };
    viewer = await fanout.join(runId, last, {
      write(entries: StreamEntry[]) {
        if (ending) return;
        for (const { id, fields } of entries) {
          const type = fields.type ?? 'message';
          res.write(`id: ${id}\nevent: ${type}\ndata: ${(fields.data ?? '').replace(/\n/g, '\ndata: ')}\n\n`);
          if (type === 'status_changed' && isTerminal(safeStatus(fields.data))) return end();
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
          .finally(end);
      },
      fail(err) {
        if (!ending) ctx.log.warn({ code: 'sse_read_failed', runId, err }, 'event stream read failed');
        end();
      },
    });
    if (!viewer) {
      return void res.end(); // not reached: the slot was checked synchronously above
    }
    if (ending || gone) viewer.leave();
  });
  return r;
}

function safeStatus(data: string | undefined): string {
  try {
    const status = (JSON.parse(data ?? '{}') as { status?: unknown }).status;
    return typeof status === 'string' ? status : '';
  } catch {
    return '';
  }
}
