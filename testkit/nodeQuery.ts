/**
 * One-off questions to a single test Redis node (a Sentinel-managed one or a Cluster node): shared by
 * testkit/sentinel.ts and testkit/replicatedCluster.ts.
 */
import { Redis } from 'ioredis';

/** Runs `f` on a fresh connection to the node on `port`; undefined when the node does not answer or `f` fails. */
export async function query<T>(port: number, f: (c: Redis) => Promise<T>): Promise<T | undefined> {
  const c = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return await f(c);
  } catch {
    return undefined;
  } finally {
    c.disconnect();
  }
}

/** Whether the node on `port` answers PING. */
export async function ping(port: number): Promise<boolean> {
  return (await query(port, (c) => c.ping())) === 'PONG';
}
