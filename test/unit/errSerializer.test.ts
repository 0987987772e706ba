/**
 * The logger's error serializer keeps no data a failed statement or command quotes: a PostgreSQL error (the `pg`
 * client's DatabaseError, its fields as a real server filled them) logs its code, severity, routine and a message
 * with what it quotes replaced, never its `where`, `detail` or `hint`; the same at any depth of a cause chain; an
 * ioredis error its command's name, not its args. The error itself is left as it was thrown.
 * An error out of agent code (a tool's, a hook's: marked where the catalog takes the agent in) logs its type, code,
 * coded details and stack frames, never its message, its causes' messages or its other fields; the engine's own
 * errors and a library's (ioredis, pg) keep their messages.
 */
import { Writable } from 'node:stream';
import { ReplyError } from 'ioredis';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentCatalog, defineAgent, defineReadTool, defineWriteTool } from '../../src/core/agent.js';
import { isAgentCodeError, markAgentError } from '../../src/core/agentCode.js';
import { AgentError, OutcomeUnknownError, RetryableError } from '../../src/core/errors.js';
import type { ReadTool, WriteTool } from '../../src/core/tool.js';
import { AGENT_MESSAGE_NOT_LOGGED, createLogger, errSerializer, redactDatabaseMessage } from '../../src/metrics/log.js';

const SECRET = 'Ada wrote: my card 4242 is stolen';

/** A DatabaseError as pg builds it from the server's ErrorResponse (pg-protocol's parser), fields as PostgreSQL 15 sent them. */
function databaseError(message: string, fields: Partial<pg.DatabaseError>): pg.DatabaseError {
  const err = new pg.DatabaseError(message, 250, 'error');
  return Object.assign(err, { severity: 'ERROR', file: 'jsonfuncs.c', line: '621', ...fields });
}

/** The jsonb write of a text holding U+0000 (the archive's failure before src/archive/pgText.ts). */
const nulInJson = () =>
  databaseError('unsupported Unicode escape sequence', {
    code: '22P05',
    routine: 'json_ereport_error',
    detail: '\\u0000 cannot be converted to text.',
    where: `JSON data, line 1: ...${SECRET} \\u0000...\nunnamed portal parameter $1 = '...'`,
  });

function logged(err: unknown): { line: Record<string, unknown>; text: string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  createLogger('errtest', 'info', stream).warn({ code: 'archive_failed', err }, 'archive of a run failed');
  const text = chunks.join('');
  return { line: JSON.parse(text) as Record<string, unknown>, text };
}

describe('the err serializer and database errors', () => {
  it("logs a database error's code, severity, routine and message, never its where, detail or hint", () => {
    const err = Object.assign(nulInJson(), { hint: `try ${SECRET}`, internalQuery: `SELECT '${SECRET}'` });
    const { line, text } = logged(err);
    expect(line.err).toMatchObject({
      type: 'DatabaseError',
      code: '22P05',
      severity: 'ERROR',
      routine: 'json_ereport_error',
      message: 'unsupported Unicode escape sequence',
    });
    const keys = Object.keys(line.err as object);
    for (const field of ['where', 'detail', 'hint', 'internalQuery']) expect(keys).not.toContain(field);
    expect(text).not.toContain('4242');
    expect(text).not.toContain('Ada');
    // The error itself is left as thrown (a caller may still read it).
    expect(err.where).toContain(SECRET);
    expect(err.detail).toBe('\\u0000 cannot be converted to text.');
  });

  it('replaces what a message quotes (a value that does not parse, the bytes of a bad encoding), in the stack too', () => {
    const badInt = databaseError(`invalid input syntax for type integer: "${SECRET}"`, {
      code: '22P02',
      routine: 'pg_strtoint32',
      where: `unnamed portal parameter $1 = '${SECRET}'`,
    });
    const { line, text } = logged(badInt);
    const err = line.err as { message: string; stack: string };
    expect(err.message).toBe('invalid input syntax for type integer: "[redacted]"');
    expect(err.stack.split('\n')[0]).toBe('error: invalid input syntax for type integer: "[redacted]"');
    expect(text).not.toContain('4242');

    expect(redactDatabaseMessage('invalid byte sequence for encoding "UTF8": 0xe2 0x28 0xa1')).toBe(
      'invalid byte sequence for encoding "[redacted]": 0x[redacted]',
    );
    // A value holding a quote: everything from the first quote to the last goes.
    expect(redactDatabaseMessage('invalid input syntax for type json: "a" 4242 "b"')).toBe(
      'invalid input syntax for type json: "[redacted]"',
    );
    expect(redactDatabaseMessage('unsupported Unicode escape sequence')).toBe('unsupported Unicode escape sequence');
  });

  it('drops the fields at any depth of a cause chain, and an ioredis command by its name only', () => {
    const wrapped = new Error('archive write failed', { cause: nulInJson() });
    const { text } = logged(wrapped);
    expect(text).toContain('unsupported Unicode escape sequence');
    expect(text).not.toContain('4242');

    const reply = Object.assign(new Error('ERR wrong number of arguments'), {
      command: { name: 'hset', args: ['run:1', 'body', SECRET] },
      detail: SECRET,
    });
    const out = errSerializer(reply) as Record<string, unknown>;
    expect(out.command).toEqual({ name: 'hset' });
    expect(JSON.stringify(out)).not.toContain('4242');
    expect(reply.command.args).toContain(SECRET);
  });
});

describe('the err serializer and error details', () => {
  it('logs the details an allow-list names (status, codes, vendor, tool, ids), never a body or an email', () => {
    const body = { to: 'jo.secret@example.com', reason: SECRET, error: { message: 'for jo.secret@example.com' } };
    const inner = new OutcomeUnknownError('service answered 500', {
      status: 500,
      body,
      email: 'jo.secret@example.com',
    });
    // An error among the fields of another (src/worker/step/model.ts' NamedWait holds the RetryableError it names).
    const err = Object.assign(
      new RetryableError('lookup failed', undefined, { vendor: 'stripe', status: 502, code: 'api_error', body }),
      { retryable: inner },
    );
    const { line, text } = logged(err);
    const e = line.err as { details: unknown; retryable: { details: unknown } };
    expect(e.details).toEqual({ vendor: 'stripe', status: 502, code: 'api_error' });
    expect(e.retryable.details).toEqual({ status: 500 });
    expect(text).not.toContain('jo.secret');
    expect(text).not.toContain('4242');
    // The error itself is left as thrown.
    expect(inner.details.body).toBe(body);
  });
});

describe('the err serializer and objects an error holds', () => {
  it("logs an object of a class by its class name: a pool error's client, with its active query's values, is not dumped", () => {
    class Client {
      activeQuery = { text: 'insert into archived_runs values ($1)', values: [SECRET] };
      connectionParameters = { user: 'postgres', host: '127.0.0.1' };
    }
    const err = Object.assign(databaseError('terminating connection due to administrator command', { code: '57P01' }), {
      client: new Client(),
    });
    const logged = errSerializer(err) as Record<string, unknown>;
    expect(logged.client).toEqual({ type: 'Client' });
    expect(logged.code).toBe('57P01');
    expect(JSON.stringify(logged)).not.toContain(SECRET);
    expect(err.client.activeQuery.values).toEqual([SECRET]);
  });
});

const ADDRESS = 'ada.lovelace@example.com';

describe('the err serializer and errors out of agent code', () => {
  it('logs type, code, coded details and stack frames, never the message, other fields or the causes’ messages', () => {
    const cause = new Error(`mailbox ${ADDRESS} unknown`);
    const err = Object.assign(
      new AgentError('invalid_input', `no order ORD-77 for customer ${ADDRESS}\nsecond line: ${SECRET}`, {
        status: 404,
        reason: 'order_missing',
        body: SECRET,
        to: ADDRESS,
      }),
      { email: ADDRESS, statusText: SECRET, retryAfterMs: 250 },
      { cause },
    );
    markAgentError(err);
    const { line, text } = logged(err);
    const e = line.err as Record<string, unknown>;
    expect(e).toMatchObject({
      type: 'AgentError',
      code: 'invalid_input',
      retry: 'redeliver',
      retryAfterMs: 250,
      details: { status: 404, reason: 'order_missing' },
    });
    expect(e.message).toBe(`${AGENT_MESSAGE_NOT_LOGGED}: ${AGENT_MESSAGE_NOT_LOGGED}`);
    const stack = String(e.stack).split('\n');
    expect(stack[0]).toBe(`AgentError: ${AGENT_MESSAGE_NOT_LOGGED}`);
    expect(stack[1]).toMatch(/^\s+at .*errSerializer\.test\.ts/);
    expect(stack).toContain(`caused by: Error: ${AGENT_MESSAGE_NOT_LOGGED}`);
    expect(e.email).toBeUndefined();
    expect(e.statusText).toBeUndefined();
    expect(text).not.toContain('ada.lovelace');
    expect(text).not.toContain('ORD-77');
    expect(text).not.toContain('4242');
    // The error itself is left as thrown: the run's observation and evidence still read its message.
    expect(err.message).toContain(ADDRESS);
  });

  it('marks what an agent’s tools and hooks throw, sync or async, once the catalog takes it in; the error is the same object', async () => {
    const thrown = new Error(`no order for ${ADDRESS}`);
    const agent = defineAgent({
      name: 'leaky',
      version: 'leaky@1',
      input: z.object({ email: z.string() }),
      key: (i) => {
        throw new Error(`no key for ${i.email}`);
      },
      instructions: () => 'x',
      tools: [
        defineReadTool({
          name: 'lookup',
          description: 'x',
          args: z.object({}),
          execute: () => Promise.reject(thrown),
        }),
        defineWriteTool({
          name: 'send',
          description: 'x',
          args: z.object({ to: z.string() }),
          service: { enforcesKey: true, reconcile: 'none' },
          identity: (a) => {
            // eslint-disable-next-line @typescript-eslint/only-throw-error -- a value that is not an Error, thrown as agent code may
            throw `no identity for ${a.to}`;
          },
          dispatch: () => Promise.reject(new Error('x')),
        }),
      ],
    });
    const ctx = { runId: 'r_1', step: 1, signal: new AbortController().signal, input: {} };
    // The agent as given: nothing marked.
    await expect((agent.tools.get('lookup') as ReadTool).execute({}, ctx)).rejects.toBe(thrown);
    expect(isAgentCodeError(thrown)).toBe(false);

    const run = new AgentCatalog([agent]).get('leaky')!;
    expect(run.tools.schemaHash).toBe(agent.tools.schemaHash);
    await expect((run.tools.get('lookup') as ReadTool).execute({}, ctx)).rejects.toBe(thrown);
    expect(isAgentCodeError(thrown)).toBe(true);
    let keyErr: unknown;
    try {
      run.key({ email: ADDRESS });
    } catch (err) {
      keyErr = err;
    }
    expect(isAgentCodeError(keyErr)).toBe(true);
    let identityErr: unknown;
    try {
      (run.tools.get('send') as WriteTool).identity!({ to: ADDRESS });
    } catch (err) {
      identityErr = err;
    }
    expect(identityErr).toBeInstanceOf(Error);
    expect(isAgentCodeError(identityErr)).toBe(true);
    const { text } = logged(identityErr);
    expect(text).toContain('"type":"AgentThrewValue"');
    expect(text).not.toContain('ada.lovelace');
  });

  it("keeps the message of the engine's own errors and of a library's (an ioredis reply)", () => {
    const reply = new ReplyError("OOM command not allowed when used memory > 'maxmemory'.");
    expect((errSerializer(reply) as { message: string }).message).toBe(
      "OOM command not allowed when used memory > 'maxmemory'.",
    );
    const engine = new RetryableError('scripted transient failure (503)', undefined, { status: 503 });
    expect((errSerializer(engine) as { message: string }).message).toBe('scripted transient failure (503)');
  });
});
