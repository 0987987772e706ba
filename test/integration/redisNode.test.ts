/**
 * The replicated stores' node starter (testkit/redisNode.ts): a Cluster node whose bus port is taken exits at start;
 * the starter starts it again on fresh ports, and one that cannot start fails with its log in the error.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../testkit/embeddedRedis.js';
import { killNode, startClusterNode, type ClusterNode } from '../../testkit/redisNode.js';

const holders: Server[] = [];
const nodes: ClusterNode[] = [];
const dirs: string[] = [];

async function takenPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  holders.push(srv);
  return (srv.address() as { port: number }).port;
}

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => killNode(n.process)));
  for (const h of holders.splice(0)) h.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('a test cluster node', () => {
  it('whose bus port is taken starts again on fresh ports', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-cluster-node-'));
    dirs.push(dir);
    const taken = await takenPort();
    const picks = [await freePort(), taken];
    const node = await startClusterNode(dir, [], async () => picks.shift() ?? freePort());
    nodes.push(node);
    expect(picks).toEqual([]);
    expect(node.busPort).not.toBe(taken);
    expect(node.process.exitCode).toBeNull();
  });

  it('that cannot start fails with its log in the error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-cluster-node-'));
    dirs.push(dir);
    const taken = await takenPort();
    let picked = 0;
    const pick = async () => (picked++ % 2 === 0 ? freePort() : taken);
    await expect(startClusterNode(dir, [], pick)).rejects.toThrow(/exited at start: .*in use/is);
  });
});
