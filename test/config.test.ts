/** Configuration fails at boot with the field named; Redis must be noeviction. */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../src/config.js';
import { assertRedisSafe, RedisMisconfigured } from '../src/redis/connect.js';
import { startEmbeddedRedis } from '../src/redis/embedded.js';

describe('config', () => {
  it('has documented defaults and freezes', () => {
    const cfg = loadConfig({});
    expect(cfg.LOCK_DURATION_MS).toBe(1200);
    expect(cfg.STALLED_INTERVAL_MS).toBe(600);
    expect(cfg.SHARDS).toBe(1);
    expect(Object.isFrozen(cfg)).toBe(true);
  });

  it('names the bad field', () => {
    expect(() => loadConfig({ LOCK_DURATION_MS: 'soon' })).toThrow(/LOCK_DURATION_MS/);
    try {
      loadConfig({ WORKER_CONCURRENCY: '0', REDIS_URL: 'not a url' });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).fields.sort()).toEqual(['REDIS_URL', 'WORKER_CONCURRENCY']);
    }
  });

  it('production refuses the scripted model and missing tokens unless configured', () => {
    expect(() => loadConfig({ APP_MODE: 'production' })).toThrow(/SCRIPTED_MODEL_ENABLED/);
    expect(() => loadConfig({ APP_MODE: 'production', SCRIPTED_MODEL_ENABLED: 'true' })).toThrow(/PRODUCER_TOKEN/);
    expect(loadConfig({ APP_MODE: 'production', SCRIPTED_MODEL_ENABLED: 'true', PRODUCER_TOKEN: 'p', OPERATOR_TOKEN: 'o' }).APP_MODE).toBe('production');
  });

  it('refuses an evicting Redis with a message saying how to fix it, warns when AOF is off', async () => {
    const evicting = await startEmbeddedRedis({ extraArgs: ['--maxmemory-policy', 'allkeys-lru', '--appendonly', 'no'] });
    const client = new Redis(evicting.url);
    try {
      await expect(assertRedisSafe(client, () => {})).rejects.toThrow(RedisMisconfigured);
      await expect(assertRedisSafe(client, () => {})).rejects.toThrow(/CONFIG SET maxmemory-policy noeviction/);
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      const warnings: string[] = [];
      const report = await assertRedisSafe(client, (m) => warnings.push(m));
      expect(report.aof).toBe(false);
      expect(warnings[0]).toMatch(/AOF is off/);
    } finally {
      client.disconnect();
      await evicting.stop();
    }
  });
});
