/**
 * A MULTI sent to a master that was demoted under it: Redis refuses its write as queued (READONLY) and the EXEC ends
 * in EXECABORT. That is the store being unavailable (a 503 and a retry), not a bug (a 500).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { freePort, startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { storeUnavailable } from '../../src/store/unavailable.js';

let replica: EmbeddedRedis;

beforeAll(async () => {
  // A replica of a master that is not there: it answers, and refuses every write.
  replica = await startEmbeddedRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(await freePort())] });
});
afterAll(async () => replica?.stop());

it("a MULTI refused as queued (EXECABORT after READONLY) is the store unavailable; a command's own error is not", async () => {
  const c = new Redis(replica.url, { maxRetriesPerRequest: 0 });
  try {
    const refused = await c
      .multi()
      .set('k', '1')
      .exec()
      .catch((e: unknown) => e);
    expect(String((refused as Error).message)).toMatch(/^EXECABORT/);
    expect(storeUnavailable(refused)).toBe(true);

    const wrong = await c
      .multi()
      .call('GET')
      .exec()
      .catch((e: unknown) => e);
    expect(String((wrong as Error).message)).toMatch(/^EXECABORT/);
    expect(storeUnavailable(wrong)).toBe(false);
  } finally {
    c.disconnect();
  }
});
