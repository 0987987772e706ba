/**
 * A real local Redis Cluster: three `redis-server --cluster-enabled yes`
 * masters on free ports in a temp dir, joined with `redis-cli --cluster create`.
 * A set-up that fails stops the nodes it had started.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killNode, startClusterNode, type ClusterNode } from './redisNode.js';
import { until } from './until.js';

export interface LocalCluster {
  nodes: string[];
  stop(): Promise<void>;
}

export async function startLocalCluster(masters = 3): Promise<LocalCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-cluster-'));
  const started: ClusterNode[] = [];
  const stop = async () => {
    await Promise.all(started.map((n) => killNode(n.process)));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) started.push(await startClusterNode(dir));
    const ports = started.map((n) => n.port);
    const nodes = ports.map((p) => `127.0.0.1:${p}`);
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8' },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    const ok = (p: number) =>
      spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes(
        'cluster_state:ok',
      );
    await until('cluster_state:ok on every node', 20_000, () => ports.every(ok), 100);
    return { nodes, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
