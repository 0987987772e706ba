/**
 * The transcript cache after a failover: the promoted replica's journal may lack the last entries this worker
 * read from the old master, and the run appends others in their place. The cache must hand out the store's
 * journal, never the history it remembers (real Redis; the failover is played by rewriting the list).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { TranscriptCache } from '../../src/runs/transcriptCache.js';
import { redisUrl } from '../../testkit/harness.js';
import { uniquePrefix } from '../../testkit/keyPrefix.js';

const redis = new Redis(redisUrl());
const key = `${uniquePrefix('tcache')}:{0}:run:r_t:journal`;
const decision = (step: number, tool: string) =>
  JSON.stringify({
    v: 1,
    kind: 'decision',
    step,
    model: 'openai',
    toolCalls: [{ id: `c${step}`, name: tool, args: {} }],
    usage: { promptTokens: 1, completionTokens: 1 },
    attempts: 1,
  });
const toolsOf = (entries: { kind: string; toolCalls?: { name: string }[] }[]) =>
  entries.map((e) => e.toolCalls?.[0]?.name);

afterAll(async () => {
  await redis.del(key);
  redis.disconnect();
});

describe('TranscriptCache', () => {
  it('reads only what was appended, and the whole journal again when a failover took entries back', async () => {
    const cache = new TranscriptCache();
    await redis.rpush(key, decision(1, 'read_ticket'));
    expect(toolsOf(await cache.load(redis, 'r_t', key))).toEqual(['read_ticket']);
    await redis.rpush(key, decision(2, 'create_ticket'));
    expect(toolsOf(await cache.load(redis, 'r_t', key))).toEqual(['read_ticket', 'create_ticket']);
    // The failover: the new master never had these two; the run starts over and appends another first entry.
    await redis.del(key);
    await redis.rpush(key, decision(1, 'lookup_order'));
    expect(toolsOf(await cache.load(redis, 'r_t', key))).toEqual(['lookup_order']);
    // Then as long as the lost history, and longer.
    await redis.del(key);
    await redis.rpush(key, decision(1, 'read_ticket'), decision(2, 'send_email'), decision(3, 'create_ticket'));
    expect(toolsOf(await cache.load(redis, 'r_t', key))).toEqual(['read_ticket', 'send_email', 'create_ticket']);
    expect(cache.diverged).toBe(2);
  });
});
