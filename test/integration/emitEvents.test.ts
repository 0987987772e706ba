/**
 * includes/emitEvents.lua writes one stream entry per call, `type <t> data <d>` for each event that happened, in
 * order. It has a direct XADD for the shapes a step's commit writes (every event present) beside the general loop;
 * every shape must give the entry the loop gives, and an entry readers expand into the same events. emitStepEvents
 * writes a step's three events as one field, which readers expand into the same three events, and checks the cap on
 * every eighth step only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { redisUrl } from '../../testkit/harness.js';
import { resolveIncludes } from '../../src/store/luaScripts.js';
import { decodeEntries, STEP_EVENTS_FIELD } from '../../src/store/runEvents.js';

const include = readFileSync(
  fileURLToPath(new URL('../../src/store/lua/includes/emitEvents.lua', import.meta.url)),
  'utf8',
);
// A commit's call: step ARGV[1], the cap ARGV[2], the three payloads after.
const stepScript = resolveIncludes(`${include}
emitStepEvents(KEYS[1], ARGV[2], tonumber(ARGV[1]), ARGV[3], ARGV[4], ARGV[5])
return redis.call('XLEN', KEYS[1])`);
// The events table as the callers build it: { type, payload, ... } from ARGV (ARGV[1] counts the pairs).
const script = resolveIncludes(`${include}
local events = {}
for i = 1, tonumber(ARGV[1]) * 2 do events[i] = ARGV[i + 1] end
emitEvents(KEYS[1], 1000, events)
return redis.call('XLEN', KEYS[1])`);

let redis: Redis;
const key = `test:emitEvents:${process.pid}`;
beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.del(key);
  redis.disconnect();
});

async function emit(pairs: [string, string][]): Promise<string[] | undefined> {
  await redis.del(key);
  const length = (await redis.eval(script, 1, key, pairs.length, ...pairs.flat())) as number;
  if (length === 0) return undefined;
  const entries = (await redis.xrange(key, '-', '+')) as [string, string[]][];
  expect(entries).toHaveLength(1);
  return entries[0]![1];
}

const expected = (pairs: [string, string][]) =>
  pairs.filter(([, d]) => d !== '').flatMap(([t, d]) => ['type', t, 'data', d]);

describe('emitEvents', () => {
  const started: [string, string] = ['step_started', '{"step":2}'];
  const decision: [string, string] = ['decision', '{"tools":["read"]}'];
  const committed: [string, string] = ['step_committed', '{"step":2,"status":"running"}'];
  const status: [string, string] = ['status_changed', '{"status":"completed"}'];

  it.each([
    ['a commit that stays running: three events', [started, decision, committed]],
    ['a commit that ends the run: four events', [started, decision, committed, status]],
    ['a decision journalled before: its events skipped', [['step_started', ''], ['decision', ''], committed]],
    ['four with one missing', [started, ['decision', ''], committed, status]],
    ['three with the last missing', [started, decision, ['step_committed', '']]],
    ['one event', [status]],
    ['five events', [started, decision, committed, status, ['woke', '{"lateMs":3}']]],
  ] as [string, [string, string][]][])('%s', async (_name, pairs) => {
    const fields = await emit(pairs);
    expect(fields).toEqual(expected(pairs));
    const events = decodeEntries([['1-0', fields!]]);
    expect(events.map((e) => e.type)).toEqual(pairs.filter(([, d]) => d !== '').map(([t]) => t));
  });

  it('adds no entry when no event happened', async () => {
    expect(
      await emit([
        ['step_started', ''],
        ['decision', ''],
      ]),
    ).toBeUndefined();
  });
});

describe('emitStepEvents', () => {
  const payloads = [
    '{"step":3,"jobId":"r_1.s3"}',
    '{"step":3,"tools":["read"],"final":false}',
    '{"step":3,"entries":2}',
  ];

  it("writes a step's three events as one field, which readers expand into the events the loop's entry holds", async () => {
    await redis.del(key);
    await redis.eval(stepScript, 1, key, 3, 1000, ...payloads);
    const entries = (await redis.xrange(key, '-', '+')) as [string, string[]][];
    expect(entries).toHaveLength(1);
    const [id, fields] = entries[0]!;
    expect(fields).toEqual([STEP_EVENTS_FIELD, payloads.join('\x1e')]);
    const looped = decodeEntries([
      [
        '1-0',
        expected([
          ['step_started', payloads[0]!],
          ['decision', payloads[1]!],
          ['step_committed', payloads[2]!],
        ]),
      ],
    ]);
    expect(decodeEntries([[id, fields]]).map((e) => [e.index, e.type, e.data])).toEqual(
      looped.map((e) => [e.index, e.type, e.data]),
    );
  });

  it('trims the stream to its cap on every eighth step, never between', async () => {
    await redis.del(key);
    // Over the cap by far: stream nodes of 2 entries, so an approximate MAXLEN trims down to it.
    await redis.config('SET', 'stream-node-max-entries', '2');
    try {
      for (let i = 0; i < 20; i++) await redis.xadd(key, '*', 'type', 'x', 'data', String(i));
      for (const step of [1, 7, 9]) {
        const before = await redis.xlen(key);
        expect(await redis.eval(stepScript, 1, key, step, 4, ...payloads)).toBe(before + 1);
      }
      expect(Number(await redis.eval(stepScript, 1, key, 8, 4, ...payloads))).toBeLessThanOrEqual(5);
    } finally {
      await redis.config('SET', 'stream-node-max-entries', '100');
    }
  });
});
