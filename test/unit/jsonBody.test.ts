/**
 * The API's JSON body parser (src/http/jsonBody.ts) answers every request as express.json does: the same body, the
 * same error type and status, whether its short path read the request or express.json did. Two in-process servers
 * on loopback, one with each parser, are sent the same requests.
 */
import { gzipSync } from 'node:zlib';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express, { type NextFunction, type Request, type Response } from 'express';
import { jsonBody, parseJsonBody } from '../../src/http/jsonBody.js';

const LIMIT = '1kb';

function echo(parser: express.RequestHandler): express.Express {
  const app = express();
  app.use(parser);
  app.post('/', (req, res) => void res.json({ body: req.body as unknown }));
  app.use((err: Error & { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(err.status ?? 500).json({ type: err.type });
  });
  return app;
}

const servers: Server[] = [];
let ours = '';
let theirs = '';

async function listen(app: express.Express): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

beforeAll(async () => {
  ours = await listen(echo(jsonBody(LIMIT, 1024)));
  theirs = await listen(echo(express.json({ limit: LIMIT })));
});
afterAll(() => servers.forEach((s) => s.close()));

/** Status and answer of a POST with these headers and raw body bytes. */
function post(url: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = (text: string, type = 'application/json') => ({
  headers: { 'content-type': type, 'content-length': String(Buffer.byteLength(text)) },
  body: Buffer.from(text),
});

const cases: [string, { headers: Record<string, string>; body: Buffer }][] = [
  ['an object', json('{"tenant":"acme","ticket":{"id":"T-1","subject":"ü 😀"}}')],
  ['an array', json(' \n[1,2,{"a":null}]')],
  ['a UTF-8 charset, quoted and in capitals', json('{"a":1}', 'Application/JSON; charset="UTF-8"')],
  ['a byte order mark first', json('\ufeff{"a":1}')],
  ['not JSON', json('{"a":')],
  ['a number, not an object (strict)', json('12')],
  ['a string, not an object (strict)', json('"text"')],
  ['whitespace only', json('  ')],
  ['a lone surrogate escaped', json('{"a":"\\ud800"}')],
  ['another type', json('{"a":1}', 'text/plain')],
  ['another charset', json('{"a":1}', 'application/json; charset=latin1')],
  ['a JSON suffix type', json('{"a":1}', 'application/vnd.api+json')],
  ['over the limit', json(`{"a":"${'x'.repeat(2000)}"}`)],
  ['empty', json('')],
  [
    'compressed',
    {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync('{"a":1}'),
    },
  ],
  [
    'chunked',
    { headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, body: Buffer.from('[1]') },
  ],
];

describe('jsonBody', () => {
  it.each(cases)('%s: answered as express.json answers it', async (_name, { headers, body }) => {
    const [a, b] = await Promise.all([post(ours, headers, body), post(theirs, headers, body)]);
    expect(a).toEqual(b);
  });

  it('parses what express.json parses, and refuses with its error type', () => {
    expect(parseJsonBody('\ufeff {"a":[1]}')).toEqual({ a: [1] });
    expect(() => parseJsonBody('1')).toThrow(expect.objectContaining({ status: 400, type: 'entity.parse.failed' }));
    expect(() => parseJsonBody('{')).toThrow(expect.objectContaining({ status: 400, type: 'entity.parse.failed' }));
  });
});
