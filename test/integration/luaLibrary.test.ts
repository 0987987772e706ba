/**
 * The step's commit runs as a function of a Redis function library (src/store/luaLibrary.ts). A server without the
 * library (a new node, a FUNCTION FLUSH) is given it by the first commit that meets its absence, and the run goes
 * on; a restarted server keeps it (it is in the AOF); a bench variant of the commit is a library of its own beside the
 * shipped one; BullMQ's helpers and ours are defined once, at the library's top level.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { library } from '../../src/store/luaScripts.js';
import { buildLibrary } from '../../src/store/luaLibrary.js';
import { luaFiles } from '../../src/store/luaFiles.js';
import { until } from '../../testkit/until.js';

let server: EmbeddedRedis;
let h: Harness;

beforeAll(async () => {
  server = await startEmbeddedRedis({ appendfsync: 'always' });
  h = await createHarness('lualibrary', { REDIS_URL: server.url });
}, 30_000);
afterAll(async () => {
  await h?.close().catch(() => {});
  await server?.stop();
});

const libraries = async (c: Redis) => ((await c.call('FUNCTION', 'LIST')) as unknown[][]).map((lib) => String(lib[1]));

const fcallStats = async (c: Redis) => {
  const line = /cmdstat_fcall:calls=(\d+),.*failed_calls=(\d+)/.exec(await c.info('commandstats'));
  return { calls: Number(line?.[1] ?? 0), failed: Number(line?.[2] ?? 0) };
};

async function completeOneRun(id: string): Promise<void> {
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket(id) }, Date.now());
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe(
    'completed',
  );
}

describe('the commit as a library function', () => {
  it('a server without the library: the first commit loads it, and every step commits by FCALL', async () => {
    const admin = new Redis(server.url);
    try {
      await admin.call('FUNCTION', 'FLUSH');
      await admin.config('RESETSTAT');
      await h.startWorker();
      await completeOneRun('LIB-1');
      expect(await libraries(admin)).toContain(library().name);
      const stats = await fcallStats(admin);
      // The first commit was refused (no such function), loaded the library and was sent again.
      expect(stats.failed).toBeGreaterThanOrEqual(1);
      expect(stats.calls - stats.failed).toBeGreaterThanOrEqual(3);

      // Flushed again mid-fleet: the next run loads it once more and completes.
      await admin.call('FUNCTION', 'FLUSH');
      await completeOneRun('LIB-2');
      expect(await libraries(admin)).toContain(library().name);
    } finally {
      admin.disconnect();
    }
  });

  it('a restarted server keeps the library (the AOF holds it): no commit meets its absence', async () => {
    await server.kill('SIGKILL');
    await server.restart();
    const admin = new Redis(server.url);
    try {
      expect(await libraries(admin)).toContain(library().name);
      await admin.config('RESETSTAT');
      await until('the store reconnected', 5000, () => h.ctx.redis.status === 'ready');
      await completeOneRun('LIB-3');
      expect((await fcallStats(admin)).failed).toBe(0);
    } finally {
      admin.disconnect();
    }
  });

  it('a variant of the commit is a library of its own, loaded beside the shipped one', async () => {
    const { source } = luaFiles().find((f) => f.name === 'commitStep')!;
    const variant = buildLibrary(new Map([['commitStep', `${source}\n-- a variant\n`]]));
    expect(variant.name).not.toBe(library().name);
    expect(variant.functions.get('commitStep')).not.toBe(library().functions.get('commitStep'));
    const admin = new Redis(server.url);
    try {
      await admin.call('FUNCTION', 'LOAD', variant.code);
      expect(await libraries(admin)).toEqual(expect.arrayContaining([library().name, variant.name]));
    } finally {
      admin.disconnect();
    }
  });

  it("defines each helper once, at the library's top level, and no event append of BullMQ's is left", () => {
    const { code } = library();
    for (const fn of ['fetchNextJob', 'storeJob', 'isQueuePausedOrMaxed', 'checkFence', 'emitEvents', 'indexRunStatus'])
      expect(code.match(new RegExp(`local function ${fn}\\(`, 'g'))).toHaveLength(1);
    expect(code).not.toMatch(/\brcall\("XADD",/);
    expect(code.startsWith(`#!lua name=${library().name}\n`)).toBe(true);
  });
});
