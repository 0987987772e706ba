/**
 * A test's server that exits at start (here its port is taken) fails the start at once, naming its exit, instead of
 * the start waiting out its timeout with nothing said.
 */
import { afterAll, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { startEmbeddedRedis } from '../../testkit/embeddedRedis.js';

// It holds the port and drops whoever connects (the start's own pings among them).
const holder = createServer((socket) => socket.destroy());
afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

it('a redis-server whose port is taken fails its start at once, naming its exit', async () => {
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as { port: number }).port;
  // Without the exit ending the wait, the start fails later as "did not answer".
  await expect(startEmbeddedRedis({ port })).rejects.toThrow(/exited at start \(1\)/);
});
