/**
 * The logger's error serializer keeps no data a failed statement or command quotes: a PostgreSQL error (the `pg`
 * client's DatabaseError, its fields as a real server filled them) logs its code, severity, routine and a message
 * with what it quotes replaced, never its `where`, `detail` or `hint`; the same at any depth of a cause chain; an
 * ioredis error its command's name, not its args. The error itself is left as it was thrown.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { OutcomeUnknownError, RetryableError } from '../../src/core/errors.js';
import { createLogger, errSerializer, redactDatabaseMessage } from '../../src/metrics/log.js';

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
