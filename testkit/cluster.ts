/**
 * A real local Redis Cluster: three `redis-server --cluster-enabled yes`
 * masters on free ports in a temp dir, joined with `redis-cli --cluster create`.
 */
import { nodeArgs, freePort } from './embeddedRedis.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from './until.js';

export interface LocalCluster {
  nodes: string[];
  stop(): Promise<void>;
}

export async function startLocalCluster(masters = 3): Promise<LocalCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-cluster-'));
  const ports: number[] = [];
  const procs: ChildProcess[] = [];
  for (let i = 0; i < masters; i++) {
    const port = await freePort();
    ports.push(port);
    procs.push(
      spawn(
        'redis-server',
        ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), ...nodeArgs(port, dir)],
        { stdio: 'ignore' },
      ),
    );
  }
  const nodes = ports.map((p) => `127.0.0.1:${p}`);
  const answers = (p: number) =>
    spawnSync('redis-cli', ['-p', String(p), 'ping'])
      .stdout?.toString()
      .trim() === 'PONG';
  for (const p of ports) await until(`cluster node ${p} started`, 10_000, () => answers(p), 50);
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], {
    encoding: 'utf8',
  });
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  const ok = (p: number) =>
    spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes(
      'cluster_state:ok',
    );
  await until('cluster_state:ok on every node', 20_000, () => ports.every(ok), 100);
  return {
    nodes,
    async stop() {
      await Promise.all(
        procs.map(
          (p) =>
            new Promise<void>((resolve) => {
              if (p.exitCode !== null) return resolve();
              p.once('exit', () => resolve());
              p.kill('SIGKILL');
            }),
        ),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
