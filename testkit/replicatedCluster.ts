/**
 * A real local Redis Cluster with replicas: `masters` masters and one replica each (`redis-server --cluster-enabled
 * yes`, AOF on, noeviction, on free ports in a temp dir), joined with `redis-cli --cluster create --cluster-replicas
 * 1`. A master can be SIGKILLed; the cluster promotes its replica by itself (after `nodeTimeoutMs`, with the other
 * masters' votes); restarted, the old master rejoins as a replica of the one that took its slots (its nodes.conf
 * keeps its identity). The failover campaign (test/e2e/failover/campaign.ts) runs on it like on Sentinel.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ping, query } from './nodeQuery.js';
import { until } from './until.js';
import calculateSlot from 'cluster-key-slot';
import { killNode, spawnNode, startClusterNode } from './redisNode.js';

export interface ClusterNodeProcess {
  port: number;
  process: ChildProcess;
}

export interface ReplicatedCluster {
  /** host:port of every node (REDIS_CLUSTER_NODES). */
  nodes: string[];
  /** Every data node, by port (roles change with failovers). */
  processes: Map<number, ClusterNodeProcess>;
  /** Masters that own slots now, by port, as a live node sees them. */
  masters(): Promise<number[]>;
  /** The replicas of the master on `port`. */
  replicasOf(port: number): Promise<number[]>;
  kill(port: number, signal?: NodeJS.Signals): Promise<void>;
  /** Starts a killed node again on its port and dir (it rejoins with its identity). */
  restart(port: number): Promise<void>;
  /** Waits until a former replica of `oldPort` owns its slots and every live node says cluster_state:ok. */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<number>;
  /** Waits until every master has a replica online. */
  waitForReplicas(timeoutMs?: number): Promise<void>;
  /** A key stored on the master on `port` (for a write that must land there). */
  keyOn(port: number, base: string): Promise<string>;
  stop(): Promise<void>;
}

interface NodeLine {
  id: string;
  port: number;
  master: boolean;
  failed: boolean;
  masterId: string;
  slots: string[];
}

/** CLUSTER NODES, parsed: one line per node (`<id> <ip:port@bus> <flags> <master> ... <slots...>`). */
function parseNodes(text: string): NodeLine[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const f = line.split(' ');
      const flags = f[2]!.split(',');
      return {
        id: f[0]!,
        port: Number(/:(\d+)@/.exec(f[1]!)?.[1] ?? 0),
        master: flags.includes('master'),
        failed: flags.includes('fail') || flags.includes('fail?'),
        masterId: f[3]!,
        slots: f.slice(8),
      };
    });
}

export async function startReplicatedCluster(
  opts: { masters?: number; nodeTimeoutMs?: number } = {},
): Promise<ReplicatedCluster> {
  const masters = opts.masters ?? 3;
  const dir = mkdtempSync(join(tmpdir(), 'agent-rcluster-'));
  const processes = new Map<number, ClusterNodeProcess>();
  const argsOf = new Map<number, string[]>();
  const start = (port: number) => processes.set(port, { port, process: spawnNode(argsOf.get(port)!) });
  const stopAll = () => Promise.all([...processes.values()].map((n) => killNode(n.process)));
  // A set-up that fails stops the nodes it had started (and removes their dir) before it throws.
  const discard = async (e: unknown) => {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
    return e;
  };
  const ports: number[] = [];
  try {
    for (let i = 0; i < masters * 2; i++) {
      const node = await startClusterNode(dir, [
        '--cluster-node-timeout',
        String(opts.nodeTimeoutMs ?? 2000),
        '--hash-max-listpack-value',
        '1024',
      ]);
      ports.push(node.port);
      argsOf.set(node.port, node.args);
      processes.set(node.port, { port: node.port, process: node.process });
    }
  } catch (e) {
    throw await discard(e);
  }
  const nodes = ports.map((p) => `127.0.0.1:${p}`);
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '1', '--cluster-yes'], {
    encoding: 'utf8',
  });
  if (create.status !== 0) {
    throw await discard(new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`));
  }

  const live = () =>
    [...processes.values()].filter((n) => n.process.exitCode === null && n.process.signalCode === null);
  const view = async (): Promise<NodeLine[]> => {
    for (const n of live()) {
      const text = await query(n.port, (c) => c.call('CLUSTER', 'NODES') as Promise<string>);
      if (text) return parseNodes(text);
    }
    throw new Error('no cluster node answers');
  };
  const clusterOk = async () => {
    for (const n of live()) {
      const info = await query(n.port, (c) => c.call('CLUSTER', 'INFO') as Promise<string>);
      if (!info?.includes('cluster_state:ok')) return false;
    }
    return true;
  };

  const handle: ReplicatedCluster = {
    nodes,
    processes,
    async masters() {
      return (await view()).filter((n) => n.master && !n.failed && n.slots.length > 0).map((n) => n.port);
    },
    async replicasOf(port) {
      const all = await view();
      const id = all.find((n) => n.port === port)?.id;
      return all.filter((n) => !n.master && n.masterId === id).map((n) => n.port);
    },
    async kill(port, signal = 'SIGKILL') {
      const n = processes.get(port);
      if (!n || n.process.exitCode !== null || n.process.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        n.process.once('exit', () => resolve());
        n.process.kill(signal);
      });
    },
    async restart(port) {
      start(port);
      await until(`node ${port} restarted`, 10_000, () => ping(port));
    },
    async waitForFailover(oldPort, timeoutMs = 60_000) {
      const before = new Set(await handle.masters());
      let now: number[] = [];
      await until(`a replica of ${oldPort} promoted`, timeoutMs, async () => {
        now = await handle.masters().catch(() => []);
        return now.length === masters && !now.includes(oldPort) && (await clusterOk());
      });
      return now.find((p) => !before.has(p)) ?? now.find((p) => p !== oldPort)!;
    },
    async waitForReplicas(timeoutMs = 60_000) {
      await until('every master with a replica online', timeoutMs, async () => {
        for (const m of await handle.masters().catch(() => [] as number[])) {
          const info = await query(m, (c) => c.info('replication'));
          if (!info || !/slave0:.*state=online/.test(info)) return false;
        }
        return clusterOk();
      });
    },
    async keyOn(port, base) {
      const slots = (await query(port, (c) => c.call('CLUSTER', 'SLOTS') as Promise<unknown[][]>)) ?? [];
      const mine = slots
        .filter((r) => Number((r[2] as unknown[])[1]) === port)
        .map((r) => [Number(r[0]), Number(r[1])]);
      for (let i = 0; i < 100_000; i++) {
        const key = `${base}{${i}}`;
        const slot = calculateSlot(key);
        if (mine.some(([a, b]) => slot >= a! && slot <= b!)) return key;
      }
      throw new Error(`no key found for the slots of ${port}`);
    },
    async stop() {
      await stopAll();
      if (process.env.SENTINEL_KEEP_DIR) console.log(`cluster dir kept: ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await until('cluster_state:ok', 30_000, clusterOk);
    await handle.waitForReplicas();
  } catch (e) {
    throw await discard(e);
  }
  return handle;
}
