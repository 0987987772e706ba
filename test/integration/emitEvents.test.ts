/**
 * includes/emitEvents.lua writes one stream entry per call, `type <t> data <d>` for each event that happened, in
 * order. It has a direct XADD for the shapes a step's commit writes (every event present) beside the general loop;
 * every shape must give the entry the loop gives, and an entry readers expand into the same events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { redisUrl } from '../../testkit/harness.js';
import { resolveIncludes } from '../../src/store/luaScripts.js';
import { decodeEntries } from '../../src/store/runEvents.js';

const include = readFileSync(
  fileURLToPath(new URL('../../src/store/lua/includes/emitEvents.lua', import.meta.url)),
  'utf8',
);
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
