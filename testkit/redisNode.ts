/**
 * One redis-server of the test's replicated stores (testkit/cluster.ts, testkit/replicatedCluster.ts,
 * testkit/sentinel.ts: a Cluster node, a Sentinel-watched node, a sentinel) on ports chosen free, killed with the test
 * process however it ends. A port from the kernel is free when asked, not when the server binds it: another process
 * can take it in between, and a Cluster node left to itself binds its bus on its port + 10000, which lands in the
 * range every outgoing connection on the machine takes its local port from (the kernel hands `listen(0)` the lower
 * half of the ephemeral range). A server that finds a port taken exits at start; waiting for its PING then timed out
 * with nothing said. Here it starts again on fresh ports, and any other failure names the server's own log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort, nodeArgs } from './embeddedRedis.js';
import { ping } from './nodeQuery.js';
import { lastLines, tracked } from './spawnedServer.js';

export interface RedisNode {
  /** The ports it was given, the one it answers on first. */
  ports: number[];
  /** Its arguments, the same on a restart (same ports, same files: the node keeps its identity). */
  args: string[];
  process: ChildProcess;
}

export interface ClusterNode extends Omit<RedisNode, 'ports'> {
  port: number;
  busPort: number;
}

const ATTEMPTS = 4;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Spawns a node with its arguments (a first start, or a restart with the same ones), killed with the test process. */
export function spawnNode(args: string[]): ChildProcess {
  return tracked(spawn('redis-server', args, { stdio: 'ignore' }));
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
 * Starts a redis-server with the arguments `argsFor` makes of `count` distinct ports from `pick` (a test gives a taken
 * one); resolves once it answers PING on the first. `logOf` names its log file, read when it stops at start.
 */
export async function startRedisNode(
  count: number,
  argsFor: (ports: number[]) => string[],
  logOf: (ports: number[]) => string,
  pick: () => Promise<number> = freePort,
): Promise<RedisNode> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    while (ports.length < count) {
      const port = await pick();
      if (!ports.includes(port)) ports.push(port);
    }
    const args = argsFor(ports);
    const child = spawnNode(args);
    const state = await answers(child, ports[0]!, 10_000);
    if (state === 'up') return { ports, args, process: child };
    await killNode(child);
    const log = lastLines(logOf(ports));
    if (state === 'exited' && /in use/i.test(log) && attempt < ATTEMPTS) continue;
    throw new Error(
      `redis-server on ${ports.join(', ')} ${state === 'exited' ? 'exited at start' : 'did not answer'}: ${log}`,
    );
  }
}

/** A cluster-enabled node in `dir` with `extraArgs`, its client and bus ports chosen free (startRedisNode). */
export async function startClusterNode(
  dir: string,
  extraArgs: string[] = [],
  pick: () => Promise<number> = freePort,
): Promise<ClusterNode> {
  const node = await startRedisNode(
    2,
    ([port, busPort]) => [
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(busPort),
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
      ...extraArgs,
      ...nodeArgs(port!, dir),
    ],
    ([port]) => join(dir, `redis-${port}.log`),
    pick,
  );
  const [port, busPort] = node.ports as [number, number];
  return { port, busPort, args: node.args, process: node.process };
}
