/**
 * A real local Redis Cluster: three `redis-server --cluster-enabled yes`
 * masters on free ports in a temp dir, joined with `redis-cli --cluster create`.
 */
import { nodeArgs, freePort } from './embeddedRedis.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
  for (const p of ports) {
    const deadline = Date.now() + 10_000;
    while (
      spawnSync('redis-cli', ['-p', String(p), 'ping'])
        .stdout?.toString()
        .trim() !== 'PONG'
    ) {
      if (Date.now() > deadline) throw new Error(`cluster node ${p} did not start`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], {
    encoding: 'utf8',
  });
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  const deadline = Date.now() + 20_000;
  while (
    !ports.every((p) =>
      spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes(
        'cluster_state:ok',
      ),
    )
  ) {
    if (Date.now() > deadline) throw new Error('cluster did not reach cluster_state:ok');
    await new Promise((r) => setTimeout(r, 100));
  }
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
