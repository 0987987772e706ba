/**
 * includes/addToBudget.lua adds a step's usage to the run's budget counters. It has a direct HMGET/HSET for the shapes
 * a step's commit sends (all four counters moved) beside the general loop; every shape must leave the
 * hash the loop leaves: each counter the sum (from 0 when absent), a '' delta leaving its counter untouched, a sum
 * past 2^53 exact by HINCRBY, the other fields kept.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { redisUrl } from '../../testkit/harness.js';
import { resolveIncludes } from '../../src/store/luaScripts.js';

const include = readFileSync(
  fileURLToPath(new URL('../../src/store/lua/includes/addToBudget.lua', import.meta.url)),
  'utf8',
);
// The deltas as the commit builds them: { field, delta, ... }.
const script = resolveIncludes(`${include}
local deltas = {}
for i = 1, #ARGV do deltas[i] = ARGV[i] end
addToBudget(KEYS[1], deltas)
return 1`);

let redis: Redis;
const key = `test:addToBudget:${process.pid}`;
beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.del(key);
  redis.disconnect();
});

async function add(before: Record<string, string>, deltas: [string, string][]): Promise<Record<string, string>> {
  await redis.del(key);
  if (Object.keys(before).length > 0) await redis.hset(key, before);
  await redis.eval(script, 1, key, ...deltas.flat());
  return redis.hgetall(key);
}

/** What the hash must hold after: BigInt sums, so a case past 2^53 is checked exactly. */
function expected(before: Record<string, string>, deltas: [string, string][]): Record<string, string> {
  const out = { ...before };
  for (const [field, delta] of deltas) {
    if (delta === '') continue;
    out[field] = String(BigInt(out[field] ?? '0') + BigInt(delta));
  }
  return out;
}

const used = { stepsUsed: '3', tokensUsed: '1200', costUsed: '450', contextBytes: '5000', maxSteps: '30' };
const four = (cost: string): [string, string][] => [
  ['stepsUsed', '1'],
  ['tokensUsed', '310'],
  ['costUsed', cost],
  ['contextBytes', '820'],
];

describe('addToBudget', () => {
  it.each([
    ['four counters, every one moved (the direct path)', used, four('95')],
    ['three counters, every one moved (the loop)', used, [four('95')[0]!, four('95')[1]!, four('95')[3]!]],
    ['four with the cost unmoved (the loop)', used, four('')],
    ['four on an empty hash: every counter from 0', {}, four('95')],
    ['a negative delta', used, [four('95')[0]!, ['tokensUsed', '-200'], four('95')[3]!]],
    ['two counters (the loop)', used, [four('95')[0]!, four('95')[1]!]],
    [
      'none moved: nothing written',
      used,
      [
        ['stepsUsed', ''],
        ['tokensUsed', ''],
      ],
    ],
    ['a sum past 2^53 on the direct path: exact, by HINCRBY', { ...used, tokensUsed: '9007199254740901' }, four('95')],
    ['a sum past 2^53 with three counters: exact', { ...used, costUsed: '9007199254740990' }, four('95').slice(1)],
  ] as [string, Record<string, string>, [string, string][]][])('%s', async (_, before, deltas) => {
    expect(await add(before, deltas)).toEqual(expected(before, deltas));
  });

  it('keeps the hash a listpack and its fields in their order', async () => {
    await add(used, four('95'));
    expect(await redis.hkeys(key)).toEqual(Object.keys(used));
    expect(await redis.object('ENCODING', key)).toBe('listpack');
  });
});
