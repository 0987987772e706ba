/**
 * At boot, REDIS_MIN_REPLICAS against the replicas actually connected to each master. A requirement the store cannot
 * meet (2 with one replica) would otherwise boot into a state where every write waits for replicas that are not there
 * and every create answers 503: refused here, naming both numbers. A store with replicas and no REDIS_MIN_REPLICAS
 * set acknowledges writes a failover can lose: refused in production unless REDIS_MIN_REPLICAS=0 is set explicitly,
 * warned about otherwise.
 */
import type { Logger } from 'pino';
import { Cluster } from 'ioredis';
import { ConfigError } from '../core/errors.js';
import { environmentOf, type Config } from '../config/config.js';
import type { RedisClient } from '../store/connect.js';

/** The fewest replicas connected to any master of the store. */
export async function connectedReplicas(redis: RedisClient): Promise<number> {
  const masters = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const counts = await Promise.all(
    masters.map(async (m) => Number(/connected_slaves:(\d+)/.exec(await m.info('replication'))?.[1] ?? 0)),
  );
  return Math.min(...counts);
}

/** The refusal (a ConfigError naming REDIS_MIN_REPLICAS) or warning for `replicas` connected; undefined when fine. */
export function replicaProblem(
  cfg: Pick<Config, 'REDIS_MIN_REPLICAS' | 'APP_MODE'>,
  explicit: boolean,
  replicas: number,
): { refuse: boolean; message: string } | undefined {
  if (cfg.REDIS_MIN_REPLICAS > replicas)
    return {
      refuse: true,
      message:
        `REDIS_MIN_REPLICAS=${cfg.REDIS_MIN_REPLICAS} but the store's master has ${replicas} connected ` +
        `replica${replicas === 1 ? '' : 's'}: every write would wait for replicas that are not there (503 on every ` +
        `create); connect the replicas or lower REDIS_MIN_REPLICAS`,
    };
  if (explicit || replicas === 0) return undefined;
  const message =
    `the store's master has ${replicas} connected replica${replicas === 1 ? '' : 's'} and REDIS_MIN_REPLICAS is unset: ` +
    'an acknowledged write can be lost in a failover; set REDIS_MIN_REPLICAS (e.g. 1), or 0 to accept that';
  return { refuse: cfg.APP_MODE === 'production', message };
}

export async function checkReplicas(cfg: Config, redis: RedisClient, log: Pick<Logger, 'warn'>): Promise<void> {
  const explicit = environmentOf(cfg).REDIS_MIN_REPLICAS !== undefined;
  const problem = replicaProblem(cfg, explicit, await connectedReplicas(redis));
  if (!problem) return;
  if (problem.refuse) throw new ConfigError(['REDIS_MIN_REPLICAS'], problem.message);
  log.warn({ code: 'redis_replicas_unacknowledged' }, problem.message);
}
