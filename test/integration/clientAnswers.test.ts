/**
 * The client against answers the API (or a proxy before it) can give that the API's own tests do not reach: a 429
 * with Retry-After, a 503 without one, a body that stalls after its headers, an event stream that goes silent without
 * a close, an event stream from an API that is down or hung (Unreachable) or that answers with nothing (an Error), a
 * search by the field names the schema spells, and a URL carrying a password. A stand-in HTTP server answers each as
 * the API's wire does (JSON bodies with `error`, SSE blocks with ids).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '../../testkit/embeddedRedis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FleetClient,
  StoreUnavailable,
  TooManyRequests,
  Unreachable,
  type RunEventMessage,
} from '../../src/client/index.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler = (_req, res) => res.end();
const requests: string[] = [];
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function drain(events: AsyncIterable<RunEventMessage>): Promise<RunEventMessage[]> {
  const seen: RunEventMessage[] = [];
  for await (const e of events) seen.push(e);
  return seen;
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

describe('the client meets', () => {
  it('a 429: TooManyRequests with the wait the API asked for, not asked again', async () => {
    requests.length = 0;
    handler = (_req, res) =>
      json(res, 429, { error: 'kept_deliveries_limit', message: 'too many kept' }, { 'retry-after': '7' });
    const err = await new FleetClient({ url, token: 't', retry: { maxDelayMs: 60_000 } })
      .deliverEvent({ tenant: 'acme', agent: 'support', key: 'k', payload: {} })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TooManyRequests);
    expect(err).toMatchObject({ code: 'kept_deliveries_limit', status: 429, retryAfterMs: 7000 });
    expect(requests).toHaveLength(1);
  });

  it('a 503 with no Retry-After: asked again after a second, not at once', async () => {
    requests.length = 0;
    handler = (_req, res) => json(res, 503, { error: 'store_unavailable' });
    const err = await new FleetClient({ url, token: 't', retry: { attempts: 2 } })
      .getRun('r_1')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailable);
    expect((err as StoreUnavailable).retryAfterMs).toBe(1000);
    expect(requests).toHaveLength(2);
  });

  it('a body that stalls after its headers: no answer, asked again for a read, then Unreachable', async () => {
    requests.length = 0;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"runId":'); // and nothing more
    };
    const err = await new FleetClient({
      url,
      token: 't',
      requestTimeoutMs: 300,
      retry: { attempts: 2, baseDelayMs: 10 },
    })
      .getRun('r_1')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Unreachable);
    expect(err).toMatchObject({ timeoutMs: 300, message: `no answer from ${url} within 0.3 s` });
    expect(requests).toHaveLength(2);
  });

  it('an API that is down, for an event stream: Unreachable once the reconnections are spent, the last error its cause', async () => {
    const down = `http://127.0.0.1:${await freePort()}`;
    const client = new FleetClient({ url: down, token: 't', retry: { baseDelayMs: 5 } });
    const err = await drain(client.followEvents('r_1', { maxReconnects: 2 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Unreachable);
    expect((err as Unreachable).message).toBe(`cannot reach ${down}: ECONNREFUSED`);
    expect(((err as Error).cause as { cause?: { code?: string } }).cause?.code).toBe('ECONNREFUSED');
  });

  it('an API that takes the stream and never answers: Unreachable naming the idle timeout', async () => {
    requests.length = 0;
    handler = () => {}; // no headers, no byte
    const client = new FleetClient({ url, token: 't', retry: { baseDelayMs: 5 } });
    const err = await drain(client.followEvents('r_1', { maxReconnects: 1, idleTimeoutMs: 100 })).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'Unreachable', timeoutMs: 100, message: `no answer from ${url} within 0.1 s` });
    expect(requests).toEqual(['GET /v1/runs/r_1/events', 'GET /v1/runs/r_1/events']);
  });

  it('an API that answers each stream with nothing while the run is at work: an Error, not Unreachable', async () => {
    handler = (req, res) => {
      if (req.url?.endsWith('/events')) return void res.writeHead(200, { 'content-type': 'text/event-stream' }).end();
      json(res, 200, { runId: 'r_1', status: 'running' });
    };
    const client = new FleetClient({ url, token: 't', retry: { baseDelayMs: 5 } });
    const err = await drain(client.followEvents('r_1', { maxReconnects: 1 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(Unreachable);
    expect((err as Error).message).toMatch(/reconnections in a row brought no event/);
  });

  it('an event stream that goes silent without a close: dropped after idleTimeoutMs, resumed after the last event', async () => {
    requests.length = 0;
    const lastIds: (string | undefined)[] = [];
    handler = (req, res) => {
      if (req.url?.endsWith('/events')) {
        const last = req.headers['last-event-id'] as string | undefined;
        lastIds.push(last);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (!last) return void res.write('id: 1-0\nevent: run_created\ndata: {}\n\n'); // then silence
        if (last === '1-0') res.write('id: 2-0\nevent: status_changed\ndata: {"status":"completed"}\n\n');
        return void res.end('retry: 30000\n\n');
      }
      json(res, 200, { runId: 'r_1', status: 'completed' });
    };
    const seen: RunEventMessage[] = [];
    for await (const e of new FleetClient({ url, token: 't' }).followEvents('r_1', { idleTimeoutMs: 200 }))
      seen.push(e);
    expect(seen.map((e) => e.id)).toEqual(['1-0', '2-0']);
    expect(lastIds).toEqual([undefined, '1-0', '2-0']);
    expect(requests.at(-1)).toBe('GET /v1/runs/r_1');
  });

  it("a search by an agent's field, named bare or as the schema spells it: one field.<name> parameter", async () => {
    requests.length = 0;
    handler = (_req, res) => json(res, 200, { runs: [] });
    const fleet = new FleetClient({ url, token: 't' });
    await fleet.listRuns({ fields: { 'field.orderId': 'A-17' } });
    await fleet.listRuns({ fields: { orderId: 'A-18' } });
    expect(requests).toEqual(['GET /v1/runs?field.orderId=A-17', 'GET /v1/runs?field.orderId=A-18']);
  });

  it('a URL with a password in it: refused when the client is made, the password in no message', () => {
    let message = '';
    try {
      new FleetClient({ url: 'http://admin:s3cret@127.0.0.1:1' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/bearer token/);
    expect(message).not.toContain('s3cret');
  });
});
