/**
 * deploy/compose.replicated.yml: the replicated Redis the fleet requires of production (docs/failover.md) is what
 * the override offers: a master, replicas and three Sentinels from the redis image, every data node with AOF and
 * noeviction, and the apps configured to find the master through the Sentinels and wait for a replica.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/config.js';

 
type Obj = Record<string, any>;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (p: string) => readFileSync(path.join(ROOT, p), 'utf8');

describe('deploy/compose.replicated.yml', () => {
  const base = parse(read('docker-compose.yml'), { merge: true, maxAliasCount: 100 }) as Obj;
  const over = parse(read('deploy/compose.replicated.yml'), { merge: true, maxAliasCount: 100 }) as Obj;
  const services = over.services as Record<string, Obj>;
  const args = (s: Obj) => (s.command as unknown[]).map(String);
  const flag = (a: string[], name: string) => a[a.indexOf(name) + 1];

  it('data nodes: the stack\'s redis and two replicas of it, each with AOF always and noeviction, from the redis image', () => {
    const data = ['redis', 'redis-replica-1', 'redis-replica-2'];
    for (const name of data) {
      const a = args(services[name]!);
      expect(a[0], name).toBe('redis-server');
      expect(flag(a, '--appendonly'), name).toBe('yes');
      expect(flag(a, '--appendfsync'), name).toBe('always');
      expect(flag(a, '--maxmemory-policy'), name).toBe('noeviction');
    }
    for (const name of data.slice(1)) {
      expect(String(services[name]!.image)).toMatch(/^redis:7\.\d+/);
      expect(args(services[name]!).slice(args(services[name]!).indexOf('--replicaof') + 1).slice(0, 2)).toEqual(['redis', '6379']);
    }
    expect(Object.keys(base.services)).toContain('redis');
  });

  it('three Sentinels watch the master with a quorum of two', () => {
    const sentinels = Object.keys(services).filter((n) => n.startsWith('redis-sentinel-'));
    expect(sentinels).toHaveLength(3);
    for (const name of sentinels) {
      const script = args(services[name]!).join(' ');
      expect(script).toContain('sentinel monitor fleet redis 6379 2');
      expect(script).toMatch(/--sentinel$/);
    }
  });

  it('the apps find the master through every Sentinel and wait for a replica, a configuration the apps accept', () => {
    const sentinelHosts = Object.keys(services).filter((n) => n.startsWith('redis-sentinel-')).map((n) => `${n}:26379`).sort();
    for (const app of ['api', 'worker-1', 'worker-2', 'reconciler']) {
      // The secrets production requires come from the environment, as in docker-compose.yml; development mode needs none.
      const env = { ...(base.services[app].environment as Obj), ...(services[app]!.environment as Obj), APP_MODE: 'development', MODEL_PROVIDER: 'scripted' } as Obj;
      expect(String(env.REDIS_SENTINELS).split(',').sort(), app).toEqual(sentinelHosts);
      const cfg = loadConfig(Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v ?? '').replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')])));
      expect(cfg.REDIS_MIN_REPLICAS, app).toBeGreaterThanOrEqual(1);
      expect(cfg.REDIS_SENTINEL_MASTER, app).toBe('fleet');
    }
  });
});
