/**
 * A real replicated Redis for failover tests: one master, `replicas` replicas and three
 * `redis-server --sentinel` processes on free ports in a temp dir (AOF on, noeviction). The master
 * can be SIGKILLed, a replica frozen (SIGSTOP: it stops acknowledging, so acknowledged writes stay
 * only on the master) and any node restarted on its own port and dir (a restarted old master is
 * turned into a replica of the new one by the sentinels).
 */
import { nodeArgs } from './embeddedRedis.js';
import type { ChildProcess } from 'node:child_process';
import { killNode, spawnNode, startRedisNode } from './redisNode.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ping, query } from './nodeQuery.js';
import { until } from './until.js';

export const SENTINEL_MASTER = 'fleet';

export interface SentinelNode {
  port: number;
  process: ChildProcess;
}

export interface LocalSentinel {
  /** host:port of each sentinel (REDIS_SENTINELS). */
  sentinels: string[];
  /** Each sentinel's process, in the order of `sentinels` (to freeze one: SIGSTOP, then SIGCONT). */
  sentinelProcesses: ChildProcess[];
  /** Every data node, by port (master and replicas; roles change with failovers). */
  nodes: Map<number, SentinelNode>;
  /** The port of the current master, as the sentinels see it. */
  masterPort(): Promise<number>;
  kill(port: number, signal?: NodeJS.Signals): Promise<void>;
  /** Starts a killed data node again on its port and dir. */
  restart(port: number): Promise<void>;
  /** Waits until the sentinels name a master other than `oldPort` and it answers as master. */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<number>;
  /** Waits until the master has `n` replicas online and caught up. */
  waitForReplicas(n: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startLocalSentinel(
  opts: { replicas?: number; downAfterMs?: number } = {},
): Promise<LocalSentinel> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-sentinel-'));
  const nodes = new Map<number, SentinelNode>();
  const argsOf = new Map<number, string[]>();
  const sentinelProcs: ChildProcess[] = [];
  const dataArgs = (port: number, replicaOf?: number) => [
    ...nodeArgs(port, dir),
    '--hash-max-listpack-value',
    '1024',
    // A failover promotes a replica that still answered; a frozen one is left out (its lag is the point of the test).
    '--replica-priority',
    '100',
    ...(replicaOf !== undefined ? ['--replicaof', '127.0.0.1', String(replicaOf)] : []),
  ];
  const startData = (port: number) => nodes.set(port, { port, process: spawnNode(argsOf.get(port)!) });
  const logOf = ([port]: number[]) => join(dir, `redis-${port}.log`);
  const startFirst = async (replicaOf?: number) => {
    const node = await startRedisNode(1, ([port]) => dataArgs(port!, replicaOf), logOf);
    const port = node.ports[0]!;
    argsOf.set(port, node.args);
    nodes.set(port, { port, process: node.process });
    return port;
  };
  const sentinels: string[] = [];
  // A set-up that fails stops what it had started (and removes the dir) before it throws.
  const stopAll = () =>
    Promise.all([...sentinelProcs, ...[...nodes.values()].map((n) => n.process)].map((p) => killNode(p)));
  let masterPort: number;
  try {
    masterPort = await startFirst();
    for (let i = 0; i < (opts.replicas ?? 2); i++) await startFirst(masterPort);
    for (let i = 0; i < 3; i++) {
      const sentinel = await startRedisNode(
        1,
        ([port]) => {
          const conf = join(dir, `sentinel-${port}.conf`);
          writeFileSync(
            conf,
            [
              `port ${port}`,
              'bind 127.0.0.1',
              `dir ${dir}`,
              `logfile ${join(dir, `sentinel-${port}.log`)}`,
              `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${masterPort} 2`,
              `sentinel down-after-milliseconds ${SENTINEL_MASTER} ${opts.downAfterMs ?? 1000}`,
              `sentinel failover-timeout ${SENTINEL_MASTER} 5000`,
              `sentinel parallel-syncs ${SENTINEL_MASTER} 2`,
              '',
            ].join('\n'),
          );
          return [conf, '--sentinel'];
        },
        ([port]) => join(dir, `sentinel-${port}.log`),
      );
      sentinelProcs.push(sentinel.process);
      sentinels.push(`127.0.0.1:${sentinel.ports[0]}`);
    }
  } catch (e) {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const sentinelPorts = sentinels.map((s) => Number(s.split(':')[1]));
  const handle: LocalSentinel = {
    sentinels,
    sentinelProcesses: sentinelProcs,
    nodes,
    async masterPort() {
      for (const port of sentinelPorts) {
        const addr = await query(
          port,
          (c) => c.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER) as Promise<[string, string] | null>,
        );
        if (addr) return Number(addr[1]);
      }
      throw new Error('no sentinel names a master');
    },
    async kill(port, signal = 'SIGKILL') {
      const n = nodes.get(port);
      if (!n || n.process.exitCode !== null || n.process.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        n.process.once('exit', () => resolve());
        n.process.kill(signal);
      });
    },
    async restart(port) {
      startData(port);
      await until(`node ${port} restarted`, 10_000, () => ping(port));
    },
    async waitForFailover(oldPort, timeoutMs = 30_000) {
      let port = oldPort;
      await until('a new master', timeoutMs, async () => {
        port = await handle.masterPort().catch(() => oldPort);
        if (port === oldPort) return false;
        const role = await query(port, (c) => c.call('ROLE') as Promise<unknown[]>);
        return role?.[0] === 'master';
      });
      return port;
    },
    async waitForReplicas(n, timeoutMs = 30_000) {
      await until(`${n} replicas online`, timeoutMs, async () => {
        const master = await handle.masterPort().catch(() => 0);
        const info = master ? await query(master, (c) => c.info('replication')) : undefined;
        const online = (info ?? '').split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
        return online >= n;
      });
    },
    async stop() {
      await stopAll();
      // SENTINEL_KEEP_DIR keeps the nodes' and sentinels' logs for a post-mortem.
      if (process.env.SENTINEL_KEEP_DIR) console.log(`sentinel dir kept: ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await handle.waitForReplicas(opts.replicas ?? 2);
  } catch (e) {
    await handle.stop();
    throw e;
  }
  return handle;
}
