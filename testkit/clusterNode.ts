/**
 * One Redis Cluster node for the test clusters (testkit/cluster.ts, testkit/replicatedCluster.ts): its client port
 * and its cluster bus port both chosen free. Left to itself a node binds its bus on its port + 10000, and a free
 * port from the kernel (the lower half of the ephemeral range) plus 10000 lands in the range every outgoing
 * connection on the machine takes its local port from: under a loaded test run that port can be taken, the node
 * exits at start and the cluster's set-up waited out its timeout with nothing said. Here a node that exits because a
 * port was taken starts again on fresh ports, and any other failure names the node's own log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort, nodeArgs } from './embeddedRedis.js';
import { ping } from './nodeQuery.js';
import { lastLines } from './spawnedServer.js';

export interface ClusterNode {
  port: number;
  busPort: number;
  /** Its arguments, the same on a restart (same ports, same nodes.conf: the node keeps its identity). */
  args: string[];
  process: ChildProcess;
}

const ATTEMPTS = 4;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every node started here and not yet gone: the test process's exit kills them, however the test ended. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Spawns a node with its arguments (a first start, or a restart with the same ones), killed with the test process. */
export function spawnNode(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Kills a node's process (SIGCONT first: a test may have frozen it) and resolves once it is gone. */
export function killNode(p: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  return new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGCONT');
    p.kill(signal);
  });
}

/** Waits until the node answers PING ('up') or its process ends ('exited'); 'silent' past `timeoutMs`. */
async function answers(p: ChildProcess, port: number, timeoutMs: number): Promise<'up' | 'exited' | 'silent'> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (p.exitCode !== null || p.signalCode !== null) return 'exited';
    if (await ping(port)) return 'up';
    if (Date.now() > deadline) return 'silent';
    await sleep(50);
  }
}

/**
 * Starts a cluster-enabled node in `dir` with `extraArgs`; resolves once it answers PING. `pick` gives the free ports
 * (a test gives a taken one).
 */
export async function startClusterNode(
  dir: string,
  extraArgs: string[] = [],
  pick: () => Promise<number> = freePort,
): Promise<ClusterNode> {
  for (let attempt = 1; ; attempt++) {
    const port = await pick();
    let busPort = await pick();
    while (busPort === port) busPort = await pick();
    const args = [
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(busPort),
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
      ...extraArgs,
      ...nodeArgs(port, dir),
    ];
    const child = spawnNode(args);
    const state = await answers(child, port, 10_000);
    if (state === 'up') return { port, busPort, args, process: child };
    await killNode(child);
    const log = lastLines(join(dir, `redis-${port}.log`));
    if (state === 'exited' && /in use/i.test(log) && attempt < ATTEMPTS) continue;
    throw new Error(
      `cluster node on ${port} (bus ${busPort}) ${state === 'exited' ? 'exited' : 'did not answer'}: ${log}`,
    );
  }
}
