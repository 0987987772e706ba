/**
 * Acknowledged means replicated. Redis replicates asynchronously: a write the master answered is gone if the
 * master dies before a replica has it and the replica is promoted. `replicated()` waits until at least
 * `minReplicas` replicas hold every write made before the call on the connection to the master that owns `key`'s
 * slot (WAIT; WAITAOF, which also waits for the replicas' fsync, where the server has it: Redis 7.2 and later), or
 * throws NotReplicatedError. Nothing the caller does after it (answering 201, sending a request to a service) may
 * happen before it returns.
 *
 * Why one wait covers more than the caller's own write: WAIT counts the replication offset of its connection's last
 * write, and the replication stream is ordered. So the wait first rewrites a fence key on the same connection (one
 * pipeline, one round trip): its offset is then the master's own, and the wait covers whatever any process wrote to
 * that master before it (a decision journalled by the delivery that died, a run another request created). Without
 * the fence a wait whose connection wrote nothing lately (an Idempotency-Key that found its run, a ledger move that
 * was already made) returns at once while the write it is meant to cover is still only on the master.
 */
import { type Redis, Cluster } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { AgentError, type RetryKind } from '../core/errors.js';
import { type RedisClient, RedisUnreachable } from './connect.js';

export interface ReplicationOptions {
  /** REDIS_MIN_REPLICAS: 0 returns at once (a single Redis, today's behaviour). */
  readonly minReplicas: number;
  /** REDIS_REPLICA_WAIT_MS: the longest one wait blocks. */
  readonly timeoutMs: number;
}

/** Fewer replicas than required acknowledged the writes in time: retry later, nothing was acknowledged. */
export class NotReplicatedError extends AgentError {
  override readonly retry: RetryKind = 'retryable';
  constructor(
    readonly acked: number,
    readonly required: number,
    readonly retryAfterMs: number,
  ) {
    super('not_replicated', `${acked} of ${required} replicas acknowledged the write`, { acked, required });
  }
}

/** How a server waits: WAITAOF (with the local fsync when it runs AOF) or WAIT only (Redis before 7.2). */
export interface WaitMode {
  waitAof: boolean;
  localAof: boolean;
}

const modes = new WeakMap<Redis, Promise<WaitMode>>();

/** Asked once per connection: COMMAND INFO answers nil for a command the server does not have. */
export function waitModeOf(node: Redis): Promise<WaitMode> {
  let mode = modes.get(node);
  if (!mode) {
    mode = (async () => {
      const info = (await node.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
      if (!Array.isArray(info) || info[0] == null) return { waitAof: false, localAof: false };
      const aof = (await node.config('GET', 'appendonly')) as string[];
      return { waitAof: true, localAof: aof[1] === 'yes' };
    })();
    mode.catch(() => modes.delete(node));
    modes.set(node, mode);
  }
  return mode;
}

/** The connection to the master that owns `key`'s slot (the client itself on a single Redis or Sentinel). */
async function masterOf(client: RedisClient, key: string): Promise<Redis> {
  if (!(client instanceof Cluster)) return client;
  const lookup = () => {
    const nodeKey = client.slots[calculateSlot(key)]?.[0];
    return { nodeKey, node: client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey) };
  };
  let found = lookup();
  if (!found.node) {
    // A failover moved the slot and nothing sent through this client's router has met a MOVED since: ask again.
    await refreshSlots(client);
    found = lookup();
  }
  if (!found.node)
    throw new RedisUnreachable(`no connection to the master of ${key}'s slot (${found.nodeKey ?? 'unknown'})`);
  return found.node;
}

/**
 * Re-reads a Cluster's slot table. The waits send their commands to a node's connection directly, never through the
 * client's router, so no MOVED reply ever tells this client that a failover moved a slot: after one, it asks.
 */
function refreshSlots(client: Cluster): Promise<void> {
  return new Promise((resolve) => client.refreshSlotsCache(() => resolve()));
}

/** How long a fence write lives: it only has to be written, never read. */
const FENCE_TTL_MS = 60_000;

/**
 * The write a wait is for, read back after the wait on the same connection: `field` of hash `key` (equal to
 * `expect` when given). Why: a command in flight when the connection drops is sent again after the reconnection
 * (ioredis resends unanswered commands), so a wait begun on a master that died can finish on the promoted replica,
 * which may never have had the write. Read after the wait, in the same pipeline, the witness shows whether the
 * server the wait ran on holds it.
 */
export interface Witness {
  readonly key: string;
  readonly field: string;
  readonly expect?: string;
}

/** The fence write, the wait and each witness's read, in one pipeline on `node` (WAIT blocks that connection). */
async function fencedWait(
  node: Redis,
  fenceKey: string,
  wait: [string, ...number[]],
  witnesses: readonly (Witness | undefined)[],
): Promise<{ reply: unknown; witnessed: boolean[] }> {
  const pipe = node
    .pipeline()
    .set(fenceKey, String(Date.now()), 'PX', FENCE_TTL_MS)
    .call(...wait);
  for (const w of witnesses) if (w) pipe.hget(w.key, w.field);
  const replies = (await pipe.exec()) ?? [];
  for (const [err] of replies) if (err) throw err;
  let next = 2;
  const witnessed = witnesses.map((w) => {
    if (!w) return true;
    const seen = replies[next++]?.[1] as string | null | undefined;
    return seen != null && (w.expect === undefined || seen === w.expect);
  });
  return { reply: replies[1]?.[1], witnessed };
}

/**
 * Replicas that acknowledged, for each witness: WAIT's count, or WAITAOF's replica count (its local fsync is required
 * too); 0 for a witness the server lacks.
 */
async function waitOn(
  node: Redis,
  fenceKey: string,
  opts: ReplicationOptions,
  witnesses: readonly (Witness | undefined)[],
): Promise<number[]> {
  const mode = await waitModeOf(node);
  if (!mode.waitAof) {
    const r = await fencedWait(node, fenceKey, ['WAIT', opts.minReplicas, opts.timeoutMs], witnesses);
    return r.witnessed.map((ok) => (ok ? Number(r.reply) : 0));
  }
  const wait: [string, ...number[]] = ['WAITAOF', mode.localAof ? 1 : 0, opts.minReplicas, opts.timeoutMs];
  const r = await fencedWait(node, fenceKey, wait, witnesses);
  const [local, replicas] = r.reply as [number, number];
  return r.witnessed.map((ok) => (!ok || (mode.localAof && Number(local) < 1) ? 0 : Number(replicas)));
}

interface Waiter {
  fenceKey: string;
  opts: ReplicationOptions;
  witness: Witness | undefined;
  resolve(acked: number): void;
  reject(err: unknown): void;
}

/** Per master connection: the waiters that arrived while a wait was in flight there (they share the next one). */
const waiting = new WeakMap<Redis, Waiter[]>();

/**
 * Group waits. A wait covers every write its fence follows, so the callers that arrive while a wait is in flight on
 * a connection share the next one: one WAIT (and one replica round trip) for all of them, their witnesses read in
 * the same pipeline. A caller never joins a wait already sent: its writes might follow that wait's fence. Without
 * this, WAITs queue one behind another on the connection (each blocks it), and with many steps dispatching at once
 * every dispatch waits for all the waits before its own.
 */
function groupWait(node: Redis, waiter: Waiter): void {
  const queued = waiting.get(node);
  if (queued) {
    queued.push(waiter);
    return;
  }
  waiting.set(node, []);
  void drain(node, [waiter]);
}

async function drain(node: Redis, batch: Waiter[]): Promise<void> {
  while (batch.length > 0) {
    const opts = {
      minReplicas: Math.max(...batch.map((w) => w.opts.minReplicas)),
      timeoutMs: Math.max(...batch.map((w) => w.opts.timeoutMs)),
    };
    try {
      const acked = await waitOn(
        node,
        batch[0]!.fenceKey,
        opts,
        batch.map((w) => w.witness),
      );
      batch.forEach((w, i) => w.resolve(acked[i]!));
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
    batch = waiting.get(node)!.splice(0);
  }
  waiting.delete(node);
}

/**
 * Waits until `opts.minReplicas` replicas hold every write made so far to the master of `fenceKey`'s slot.
 * @param fenceKey a key of the slot (KeySpace.replicaFence of the run's shard), rewritten before the wait
 * @param witness the write the wait is for, in the same slot: absent from the server the wait ran on counts as 0
 * @returns the replicas that acknowledged (0 without waiting when none are required)
 * @throws NotReplicatedError when fewer acknowledged within `opts.timeoutMs` (retry after `retryAfterMs`)
 */
export async function replicated(
  client: RedisClient,
  fenceKey: string,
  opts: ReplicationOptions,
  retryAfterMs = 1000,
  witness?: Witness,
): Promise<number> {
  if (opts.minReplicas <= 0) return 0;
  const node = await masterOf(client, fenceKey);
  let acked: number;
  try {
    acked = await new Promise<number>((resolve, reject) =>
      groupWait(node, { fenceKey, opts, witness, resolve, reject }),
    );
  } catch (err) {
    // The node may not be the slot's master any more (READONLY from a demoted one, a closed connection): the next
    // wait goes where the slot is now.
    if (client instanceof Cluster) await refreshSlots(client);
    throw err;
  }
  if (acked < opts.minReplicas) throw new NotReplicatedError(acked, opts.minReplicas, retryAfterMs);
  return acked;
}

/**
 * The connection replication waits run on, apart from the one every other command uses. WAIT blocks the connection
 * it is sent on until the replicas answer or its timeout passes, and every command queued behind it there waits too:
 * on the shared connection a lagging replica would hold up step commits, lock renewals and the owner watch for up to
 * REDIS_REPLICA_WAIT_MS per wait. A fence written here still covers what any connection wrote before it (the
 * replication stream is ordered), so the waits lose nothing by moving; grouped (above), one connection serves them.
 */
export async function openReplicaWaitConnection(
  client: RedisClient,
  onError: (err: unknown) => void,
): Promise<RedisClient> {
  const conn = client.duplicate();
  conn.on('error', onError);
  await conn.ping();
  return conn;
}
