/**
 * A Sentinel client follows a failover that lands while it is asking the sentinels where the master is. The race it
 * must survive: the master dies, the client reconnects and asks a sentinel (slow to answer here: frozen), the other
 * sentinels promote a replica and publish `+switch-master`, and the failover detector of the dead connection, still
 * subscribed, disconnects the connector in the middle of that question. ioredis then rejects its own reconnection
 * (`Connection is closed`) and ends the client for good: every later command fails until the process restarts. In a
 * failover campaign the API's client ended so, and every create after it was a 503.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createRedis, type RedisClient } from '../../../src/store/connect.js';
import { startLocalSentinel, SENTINEL_MASTER, type LocalSentinel } from '../../../testkit/sentinel.js';
import { query } from '../../../testkit/nodeQuery.js';
import { until } from '../../../testkit/until.js';

let s: LocalSentinel | undefined;
const clients: RedisClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await s?.stop();
  s = undefined;
});

const portOf = (hostPort: string) => Number(hostPort.split(':')[1]);

/** Subscribes to `+switch-master` on each sentinel (subscribed when this returns); `all` once every one published it. */
async function switchSeenOn(sentinels: string[]): Promise<{ all: Promise<void>; close(): void }> {
  const subs = sentinels.map((hp) => new Redis({ port: portOf(hp), host: '127.0.0.1' }));
  for (const sub of subs) sub.on('error', () => {});
  const all = Promise.all(subs.map((sub) => new Promise((resolve) => sub.once('message', resolve)))).then(() => {});
  // Subscribed before the kill: a message published earlier would be missed.
  await Promise.all(subs.map((sub) => sub.subscribe('+switch-master')));
  return { all, close: () => subs.forEach((c) => c.disconnect()) };
}

describe('a Sentinel client', () => {
  it('reconnects to the promoted master when the failover lands while it asks a sentinel', async () => {
    s = await startLocalSentinel({ replicas: 1, downAfterMs: 500 });
    const client = createRedis({ sentinel: { nodes: s.sentinels, master: SENTINEL_MASTER } }, 'race');
    clients.push(client);
    client.on('error', () => {});
    let ended = false;
    client.on('end', () => (ended = true));
    await client.set('before', '1');
    // On the replica before the kill: the promoted master has it (replication is asynchronous; under load it lags).
    expect(Number(await client.call('WAIT', 1, 5000))).toBe(1);
    const others = s.sentinels.slice(1);
    // The failover detector of this connection is subscribed on every sentinel.
    const detectorOn = async (hp: string) => {
      const list = await query(portOf(hp), (c) => c.call('CLIENT', 'LIST') as Promise<string>);
      return / sub=1 /.test(list ?? '');
    };
    await until('failover detector subscribed', 10_000, async () =>
      (await Promise.all(others.map(detectorOn))).every(Boolean),
    );
    const seen = await switchSeenOn(others);
    try {
      const oldMaster = await s.masterPort();
      // The sentinel the client asks first (the one it found the master through) answers late: frozen.
      s.sentinelProcesses[0]!.kill('SIGSTOP');
      await s.kill(oldMaster);
      // The others promote the replica; the dead connection's detector hears +switch-master from them.
      await seen.all;
      const promoted = await query(portOf(others[0]!), (c) =>
        c.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER),
      );
      expect(Number((promoted as string[])[1])).not.toBe(oldMaster);
      // Still asking the frozen sentinel: the question is in flight when the failover lands.
      expect(client.status).toBe('connecting');
      s.sentinelProcesses[0]!.kill('SIGCONT');
      await until('the client reconnected', 30_000, () => client.status === 'ready' || ended, 20);
      expect(ended).toBe(false);
      await client.set('after', '1');
      expect(await client.get('before')).toBe('1');
    } finally {
      seen.close();
      s.sentinelProcesses[0]!.kill('SIGCONT');
    }
  }, 60_000);
});
