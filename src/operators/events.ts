/**
 * GET /v1/runs/:id/events: the run's Redis stream as Server-Sent Events.
 * Each client gets its own duplicated connection (XREAD BLOCK holds it), closed
 * when the client goes. Stream ids are the SSE ids, so a client that
 * reconnects with Last-Event-ID continues after the last event it saw, each
 * event once. The response ends after a terminal status_changed event.
 * Any token that may read the run may follow it (a tenant token: its own runs).
 */
import { Router, type Request } from 'express';
import type { AppContext } from '../app/context.js';
import { requireRunAccess } from '../producer/auth.js';
import type { RedisClient } from '../redis/connect.js';
import { param } from './http.js';

const TERMINAL = new Set(['completed', 'failed', 'budget_exceeded', 'cancelled']);
const STREAM_ID = /^\d+-\d+$/;

export interface EventsOptions {
  /** XREAD BLOCK time; on each timeout a keep-alive comment is sent and the run's status checked. */
  blockMs?: number;
}

function startId(req: Request): string | undefined {
  const given = req.header('last-event-id') ?? (typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined);
  if (given === undefined || given === '') return '0-0';
  return STREAM_ID.test(given) ? given : undefined;
}

export function eventsRouter(ctx: AppContext, opts: EventsOptions = {}): Router {
  const r = Router();
  const blockMs = opts.blockMs ?? 10_000;
  r.get('/v1/runs/:id/events', requireRunAccess(ctx), async (req, res) => {
    const runId = param(req.params.id);
    let last = startId(req);
    if (last === undefined) return void res.status(400).json({ error: 'invalid_request', fields: [{ path: 'Last-Event-ID', message: 'a stream id like 1700000000000-0' }] });
    if (!(await ctx.store.exists(runId))) return void res.status(404).json({ error: 'not_found', runId });
    const k = ctx.keys.run(runId);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.flushHeaders();

    const conn = (ctx.redis as { duplicate(): RedisClient }).duplicate();
    conn.on('error', () => {}); // a closed client is reported by the read below
    let closed = false;
    res.on('close', () => {
      closed = true;
      conn.disconnect();
    });
    try {
      while (!closed) {
        const reply = (await conn.xread('COUNT', 100, 'BLOCK', blockMs, 'STREAMS', k.events, last)) as [string, [string, string[]][]][] | null;
        if (closed) break;
        if (!reply) {
          const status = await ctx.redis.hget(k.run, 'status');
          if (status === null || TERMINAL.has(status)) break;
          res.write(': keep-alive\n\n');
          continue;
        }
        let done = false;
        for (const [, entries] of reply) {
          for (const [id, flat] of entries) {
            const fields: Record<string, string> = {};
            for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
            const type = fields.type ?? 'message';
            res.write(`id: ${id}\nevent: ${type}\ndata: ${(fields.data ?? '').replace(/\n/g, '\ndata: ')}\n\n`);
            last = id;
            if (type === 'status_changed' && TERMINAL.has(safeStatus(fields.data))) done = true;
          }
        }
        if (done) break;
      }
    } catch (err) {
      if (!closed) ctx.log.warn({ code: 'sse_read_failed', runId, err: (err as Error).message }, 'event stream read failed');
    } finally {
      conn.disconnect();
      if (!res.writableEnded) res.end();
    }
  });
  return r;
}

function safeStatus(data: string | undefined): string {
  try {
    return String((JSON.parse(data ?? '{}') as { status?: unknown }).status ?? '');
  } catch {
    return '';
  }
}
