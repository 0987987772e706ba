/**
 * Redis connections: a single server (REDIS_URL), Redis Sentinel (REDIS_SENTINELS) or Redis Cluster
 * (REDIS_CLUSTER_NODES). BullMQ needs maxRetriesPerRequest=null on the
 * connections it blocks on; we use the same setting everywhere so a Redis
 * restart stalls callers instead of failing them.
 */
import { type ChainableCommander, Cluster, Redis, SentinelConnector } from 'ioredis';
import { type Config } from '../config/config.js';
import { ConfigError, TerminalError } from '../core/errors.js';
import { resultWithin } from '../core/timeout.js';

export type RedisClient = Redis | Cluster;

/**
 * The replies of a MULTI's commands, in order: throws when the transaction was aborted (`what` names the read) or a
 * command failed, so a caller reads replies that are all there.
 */
export async function transactionReplies(tx: ChainableCommander, what: string): Promise<unknown[]> {
  const res = await tx.exec();
  if (!res) throw new Error(`${what} was aborted`);
  return res.map(([err, reply]) => {
    if (err) throw err;
    return reply;
  });
}

/**
 * A WATCHed transaction's replies: null when a watched key changed (nothing was written: read again and retry);
 * otherwise the first command error, thrown. Redis runs every command of an EXEC even after one fails, so such an
 * error means the change was made in part: the caller must not report it done.
 */
export async function watchedReplies(tx: ChainableCommander, what: string): Promise<unknown[] | null> {
  const res = await tx.exec();
  if (res === null) return null;
  return res.map(([err, reply]) => {
    if (err) throw new Error(`${what}: a command of the transaction failed (${err.message})`, { cause: err });
    return reply;
  });
}

export interface RedisTarget {
  url?: string;
  clusterNodes?: string[];
  /** Redis Sentinel: the sentinels (host:port) and the master's name; ioredis asks them where the master is. */
  sentinel?: { nodes: string[]; master: string; password?: string; sentinelPassword?: string };
}

export function targetOf(cfg: Config): RedisTarget {
  if (cfg.REDIS_CLUSTER_NODES.length > 0) return { clusterNodes: cfg.REDIS_CLUSTER_NODES };
  if (cfg.REDIS_SENTINELS.length > 0) {
    return {
      sentinel: {
        nodes: cfg.REDIS_SENTINELS,
        master: cfg.REDIS_SENTINEL_MASTER,
        ...(cfg.REDIS_PASSWORD ? { password: cfg.REDIS_PASSWORD } : {}),
        ...(cfg.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: cfg.REDIS_SENTINEL_PASSWORD } : {}),
      },
    };
  }
  if (cfg.REDIS_URL) return { url: cfg.REDIS_URL };
  throw new ConfigError(
    ['REDIS_URL'],
    'invalid configuration: REDIS_URL: required by this process (or REDIS_CLUSTER_NODES)',
  );
}

/** The target as it may be printed: host and port, never the password. */
export function describeTarget(target: RedisTarget): string {
  if (target.clusterNodes && target.clusterNodes.length > 0) return `Redis Cluster ${target.clusterNodes.join(',')}`;
  if (target.sentinel)
    return `Redis master '${target.sentinel.master}' of the sentinels ${target.sentinel.nodes.join(',')}`;
  try {
    const u = new URL(target.url ?? 'redis://127.0.0.1:6379');
    return `Redis at ${u.protocol}//${u.host}`;
  } catch {
    return 'Redis (unparsable URL)';
  }
}

/** Redis did not answer within the boot timeout: the process does not start (cause: the last connection error). */
export class RedisUnreachable extends TerminalError {
  constructor(message: string, options?: ErrorOptions) {
    super('redis_unreachable', message, {}, options);
  }
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
  const onError = (err: Error) => {
    lastError = err;
  };
  client.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      timer = setTimeout(() => {
        const why = lastError
          ? `: ${lastError.message || (lastError as { code?: string }).code || lastError.name}`
          : '';
        reject(
          new RedisUnreachable(
            `${describeTarget(target)} unreachable for ${timeoutMs} ms (REDIS_BOOT_TIMEOUT_MS)${why}`,
            { cause: lastError },
          ),
        );
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

function hostPort(hp: string): { host: string; port: number } {
  const [host, port] = hp.split(':');
  return { host: host || '127.0.0.1', port: Number(port ?? 6379) };
}

/**
 * A master demoted to replica by a failover answers writes with READONLY while the client still talks to it:
 * reconnect (Sentinel tells the client the new master) and resend the command, which never ran.
 */
export function reconnectOnReadonly(err: Error): 2 | false {
  return err.message.startsWith('READONLY') ? 2 : false;
}

/**
 * ioredis's Sentinel connector, with the failover detector of a connection retired when the next connection attempt
 * begins. Why: the detector (subscribed to `+switch-master` on the sentinels) outlives the connection it watches, and
 * when a failover is announced while the client is reconnecting, asking a sentinel where the master is, the old
 * detector disconnects the connector mid-question; ioredis then rejects its own reconnection (`Connection is closed`)
 * and ends the client for good, so every later command of the process fails. A reconnection asks the sentinels anyway:
 * the old detector has nothing left to do. ioredis has no hook for this; its detector field is private, hence the
 * cast. `Connector` is an ioredis option, so every duplicate of the client (BullMQ's connections) has it too.
 */
class FailoverSafeSentinelConnector extends SentinelConnector {
  // ioredis constructs a `Connector` with the client's options, typed unknown there.
  constructor(options: unknown) {
    super(options as ConstructorParameters<typeof SentinelConnector>[0]);
  }

  override connect(...args: Parameters<SentinelConnector['connect']>): ReturnType<SentinelConnector['connect']> {
    const self = this as unknown as { failoverDetector: { cleanup(): void } | null };
    self.failoverDetector?.cleanup();
    self.failoverDetector = null;
    return super.connect(...args);
  }
}

export function createRedis(target: RedisTarget, name = 'agent'): RedisClient {
  if (target.clusterNodes && target.clusterNodes.length > 0) {
    return new Cluster(target.clusterNodes.map(hostPort), {
      redisOptions: { maxRetriesPerRequest: null, connectionName: name, reconnectOnError: reconnectOnReadonly },
      enableReadyCheck: true,
    });
  }
  if (target.sentinel) {
    const { nodes, master, password, sentinelPassword } = target.sentinel;
    return new Redis({
      sentinels: nodes.map(hostPort),
      name: master,
      role: 'master',
      // Sentinel's +switch-master moves the client at once instead of after its next failed command.
      failoverDetector: true,
      Connector: FailoverSafeSentinelConnector,
      ...(password ? { password } : {}),
      ...(sentinelPassword ? { sentinelPassword } : {}),
      maxRetriesPerRequest: null,
      connectionName: name,
      reconnectOnError: reconnectOnReadonly,
    });
  }
  return new Redis(target.url ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: null,
    connectionName: name,
    reconnectOnError: reconnectOnReadonly,
  });
}

/** Whether the client holds a connection it can send commands on now (a Cluster: its slot table too). */
export function storeConnected(client: RedisClient): boolean {
  return client.status === 'ready';
}

/**
 * Whether the client has given up for good (`end`): ioredis reconnects no more. A process's own close ends it too;
 * otherwise (seen with a Sentinel client that rejected its own reconnection after a failover) every later command fails
 * and only a restart of the process brings the store back, so liveness fails (src/http/opsServer.ts, src/http/api.ts).
 */
export function storeEnded(client: RedisClient): boolean {
  return client.status === 'end';
}

/**
 * How long the client has been without a connection it can send commands on (0 while it has one), from its events
 * after this call: a stopping process tells a store that is restarting or failing over (seconds) from one that is gone.
 */
export function storeUnreachableFor(client: RedisClient, now: () => number = Date.now): () => number {
  let since = storeConnected(client) ? undefined : now();
  const lost = () => (since ??= now());
  client.on('close', lost);
  client.on('end', lost);
  client.on('ready', () => (since = undefined));
  return () => (storeConnected(client) ? 0 : now() - lost());
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

/** Redis evicts keys: queues and ledgers would lose them silently, so the process does not start. */
export class RedisMisconfigured extends TerminalError {
  constructor(message: string, options?: ErrorOptions) {
    super('redis_misconfigured', message, {}, options);
  }
}

/**
 * Refuses to start on an evicting Redis (queues and ledgers would silently lose
 * keys) and warns when AOF is off (a Redis restart would lose acknowledged steps).
 */
export async function assertRedisSafe(client: RedisClient, warn: (msg: string) => void): Promise<RedisConfigReport> {
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
  if (!node) throw new RedisUnreachable(`no connection to the master of slot ${slot} (${nodeKey ?? 'unknown'})`);
  return node;
}

/**
 * Readiness: the client is connected and what it talks to takes writes now: a master (ROLE; a demoted one is a
 * replica), or on a Cluster a node that reports every slot served (cluster_state:ok). False past `timeoutMs`.
 */
export async function storeWritable(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (!storeConnected(client)) return false;
  const check =
    client instanceof Cluster
      ? client.cluster('INFO').then((info) => String(info).includes('cluster_state:ok'))
      : client.call('ROLE').then((role) => Array.isArray(role) && role[0] === 'master');
  return resultWithin(
    check.catch(() => false),
    timeoutMs,
    false,
  );
}
