/**
 * A test's server that exits at start (here its port is taken) fails the start at once, naming its exit and its log,
 * instead of the start waiting out its timeout with nothing said; a server on a port of its own choosing starts again
 * on another.
 */
import { afterAll, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { onFreePort, startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';

// It holds a port and drops whoever connects (the start's own pings among them).
const holder = createServer((socket) => socket.destroy());
const started: EmbeddedRedis[] = [];
afterAll(async () => {
  await Promise.all(started.map((r) => r.stop()));
  await new Promise<void>((resolve) => holder.close(() => resolve()));
});

async function heldPort(): Promise<number> {
  if (!holder.listening) await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  return (holder.address() as { port: number }).port;
}

it('a redis-server whose port is taken fails its start at once, naming its exit and why', async () => {
  const port = await heldPort();
  // Without the exit ending the wait, the start fails later as "did not answer".
  await expect(startEmbeddedRedis({ port })).rejects.toThrow(/exited at start \(1\): .*in use/is);
});

it('a start on a free port that loses the port to another process starts again on another', async () => {
  const taken = await heldPort();
  const tried: number[] = [];
  const redis = await onFreePort((port) => {
    tried.push(port);
    // The first try finds its port taken, as when another process binds it between the probe and the server.
    return startEmbeddedRedis({ port: tried.length === 1 ? taken : port });
  });
  started.push(redis);
  expect(tried).toHaveLength(2);
  expect(redis.port).toBe(tried[1]);
});
