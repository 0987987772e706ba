/**
 * Redis connections: a single server (REDIS_URL) or Redis Cluster
 * (REDIS_CLUSTER_NODES). BullMQ needs maxRetriesPerRequest=null on the
 * connections it blocks on; we use the same setting everywhere so a Redis
 * restart stalls callers instead of failing them.
 */
import { Cluster, Redis } from 'ioredis';
import { ConfigError, type Config } from '../config/config.js';

export type RedisClient = Redis | Cluster;

export interface RedisTarget {
  url?: string;
  clusterNodes?: string[];
}

export function targetOf(cfg: Config): RedisTarget {
  if (cfg.REDIS_CLUSTER_NODES.length > 0) return { clusterNodes: cfg.REDIS_CLUSTER_NODES };
  if (cfg.REDIS_URL) return { url: cfg.REDIS_URL };
  throw new ConfigError(['REDIS_URL'], 'invalid configuration: REDIS_URL: required by this process (or REDIS_CLUSTER_NODES)');
}

/** The target as it may be printed: host and port, never the password. */
export function describeTarget(target: RedisTarget): string {
  if (target.clusterNodes && target.clusterNodes.length > 0) return `Redis Cluster ${target.clusterNodes.join(',')}`;
  try {
    const u = new URL(target.url ?? 'redis://127.0.0.1:6379');
    return `Redis at ${u.protocol}//${u.host}`;
  } catch {
    return 'Redis (unparsable URL)';
  }
}

export class RedisUnreachable extends Error {
  readonly code = 'redis_unreachable';
}

/**
 * At boot: waits until the client is ready, at most `timeoutMs`, or fails with RedisUnreachable
 * naming the target and the last connection error (the client is then disconnected). Connection
 * errors while waiting go to this wait, not to a log line per retry. Once ready the client's
 * usual reconnecting behaviour is unchanged.
 */
export async function waitForRedis(client: RedisClient, target: RedisTarget, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return;
  let lastError: Error | undefined;
  const onError = (err: Error) => { lastError = err; };
  client.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      timer = setTimeout(() => {
        const why = lastError ? `: ${lastError.message || (lastError as { code?: string }).code || lastError.name}` : '';
        reject(new RedisUnreachable(`${describeTarget(target)} unreachable for ${timeoutMs} ms (REDIS_BOOT_TIMEOUT_MS)${why}`, { cause: lastError }));
      }, timeoutMs);
    });
  } catch (err) {
    client.disconnect();
    throw err;
  } finally {
    clearTimeout(timer);
    client.off('error', onError);
  }
}

export function createRedis(target: RedisTarget, name = 'agent'): RedisClient {
  if (target.clusterNodes && target.clusterNodes.length > 0) {
    const nodes = target.clusterNodes.map((hp) => {
      const [host, port] = hp.split(':');
      return { host: host ?? '127.0.0.1', port: Number(port ?? 6379) };
    });
    return new Cluster(nodes, {
      redisOptions: { maxRetriesPerRequest: null, connectionName: name },
      enableReadyCheck: true,
    });
  }
  return new Redis(target.url ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: null,
    connectionName: name,
  });
}

export interface RedisConfigReport {
  noeviction: boolean;
  aof: boolean;
  policy: string;
}

/** Reads maxmemory-policy and appendonly from every master. */
export async function inspectRedisConfig(client: RedisClient): Promise<RedisConfigReport> {
  const nodes: Redis[] = client instanceof Cluster ? client.nodes('master') : [client];
  let noeviction = true;
  let aof = true;
  let policy = 'noeviction';
  for (const node of nodes) {
    const p = (await node.config('GET', 'maxmemory-policy')) as string[];
    const a = (await node.config('GET', 'appendonly')) as string[];
    if (p[1] !== 'noeviction') {
      noeviction = false;
      policy = p[1] ?? 'unknown';
    }
    if (a[1] !== 'yes') aof = false;
  }
  return { noeviction, aof, policy };
}

export class RedisMisconfigured extends Error {
  readonly code = 'redis_misconfigured';
}

/**
 * Refuses to start on an evicting Redis (queues and ledgers would silently lose
 * keys) and warns when AOF is off (a Redis restart would lose acknowledged steps).
 */
export async function assertRedisSafe(
  client: RedisClient,
  warn: (msg: string) => void,
): Promise<RedisConfigReport> {
  const report = await inspectRedisConfig(client);
  if (!report.noeviction) {
    throw new RedisMisconfigured(
      `Redis maxmemory-policy is '${report.policy}': queues and ledgers need 'noeviction'. ` +
        `Fix: redis-cli CONFIG SET maxmemory-policy noeviction (and set it in redis.conf).`,
    );
  }
  if (!report.aof) {
    warn('Redis AOF is off: a Redis restart loses acknowledged steps. Fix: CONFIG SET appendonly yes');
  }
  return report;
}

/**
 * The connection that serves `key`'s hash slot: the client itself on a single
 * server; on a Cluster, the client's own connection to the master that owns the
 * slot (CLUSTER KEYSLOT, then ioredis's public slot table). Connection-scoped
 * commands (CLIENT ID, CLIENT LIST) must go to that node. Throws while the
 * cluster has no slot table yet (the caller retries on its next tick).
 */
export async function nodeForKey(client: RedisClient, key: string): Promise<Redis> {
  if (!(client instanceof Cluster)) return client;
  const slot = Number(await client.call('CLUSTER', 'KEYSLOT', key));
  const nodeKey = client.slots[slot]?.[0];
  const node = client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
  if (!node) throw new Error(`no connection to the master of slot ${slot} (${nodeKey ?? 'unknown'})`);
  return node;
}
