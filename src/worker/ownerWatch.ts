/**
 * Notice death, not silence. A process that dies (SIGKILL, OOM kill, a crash)
 * has its TCP connections closed by the kernel at once; one that is merely
 * slow (GC, CPU throttling, a long synchronous stretch) keeps them. So:
 *
 *  - every BullMQ worker of this process locks its jobs with tokens that name
 *    the Redis connection it works on (`<base>@<owner>:<n>`, owner
 *    `<CLIENT ID>-<server>`, src/store/owners.ts, bullmqInternals.nameWorkerOwner),
 *    renamed whenever that connection changes;
 *  - every OWNER_WATCH_MS, for each shard it consumes, the watcher reads the
 *    owners named by the queue's active locks (activeOwners-2.lua: one scan of
 *    the locks a period, shared by every watcher of the queue) and asks
 *    the server which of them still exist (`CLIENT LIST ID ...`, on the node
 *    that owns the shard's slot on a Cluster; an owner that names another
 *    server process is gone);
 *  - the active jobs of a vanished owner go back to wait at once
 *    (requeueDeadOwner-7.lua, which moves a job only while its lock still names
 *    that client), with a BullMQ `stalled` event, a stall counted on the job,
 *    `agent_dead_owner_requeues_total` and an `owner_gone` log line;
 *  - between two passes, every OWNER_PROBE_MS, a probe asks each node only
 *    whether its neighbours are still alive: the PROBE_FANOUT owners that follow
 *    this process's own in the ring of the owners the last pass found alive,
 *    sorted (one `CLIENT LIST ID ...` per node, no script). One that is gone
 *    starts a pass at once. Every watcher sorts the same shared scan, so every
 *    owner is probed by the PROBE_FANOUT owners before it. A death is then
 *    noticed within the probe's period, not the pass's, at the price of one
 *    small command per node per probe; an owner that appears and dies between
 *    two passes, or whose probing neighbours die with it, is still found by the
 *    next pass, which asks about every owner.
 *
 * Why shared and why neighbours: each scan reads one lock per active job, and
 * was made by every watcher every pass, so its cost grew with the square of the
 * fleet (20 workers of concurrency 20: 200 scans of 400 locks a second, a third
 * of a Redis core, bench/ownerWatchCost.ts); each probe asked about every other
 * owner.
 *
 * Why spread: a pass or a probe is a duty of the node, not of each watcher (a
 * pass by any watcher moves every dead owner's jobs), yet every watcher did both
 * on its own clock, so the requests grew with the fleet: 50 workers sent 500
 * passes and 2,500 probes a second to one node. From 2 x WATCH_SPREAD owners on
 * a node, each watcher passes and probes `spread` (owners / WATCH_SPREAD, rounded
 * down) times less often, at a random phase, and each probe asks about `spread`
 * times as many neighbours: the node still sees about WATCH_SPREAD passes a pass
 * period, and every owner is still probed PROBE_FANOUT x spread times in spread
 * probe periods, by as many processes. A smaller fleet watches as before.
 *
 * Locks can then be long (LOCK_DURATION_MS): they only bound a process that is
 * frozen (SIGSTOP, a partition), which BullMQ's stall check still recovers.
 *
 * Why in every worker and not in the reconciler: recovery then needs no other
 * process (the reconciler is one elected sweeper whose failover takes seconds),
 * and a tick costs at most two small round trips per shard (the active owners,
 * their liveness; the connection's own id only after it reconnected, and the
 * script when an owner is gone); several watchers racing on one dead owner are
 * safe, the script moves each job once.
 *
 * A connection that drops and reconnects while its process lives loses its
 * jobs exactly like a false stall: the old delivery keeps running, the commit's
 * fence (the job lock) refuses it and the ledger keeps its effects once. Its
 * return starts a pass at once, which names the process's workers after the
 * new connection before they fetch many jobs under the old name.
 * A Redis restart or a failover numbers connections anew; an owner names the
 * server process too, so a lock from before it is never taken for a new
 * connection that happens to have the same id: its job moves at the next tick.
 * Decision record 0005: docs/decisions/0005-notice-death-not-silence.md.
 */
import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { Metrics } from '../metrics/metrics.js';
import { type RedisClient, nodeForKey } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { nameWorkerOwner, ownerOfToken } from '../store/bullmqInternals.js';
import { liveOwners, ownerOfConnection } from '../store/owners.js';
import { activeOwners } from '../store/calls/activeOwners.js';
import { requeueDeadOwner } from '../store/calls/requeueDeadOwner.js';

export interface OwnerWatchOptions {
  /** Poll period in ms (OWNER_WATCH_MS); 0 names the owners but never polls (lock expiry alone recovers). */
  intervalMs: number;
  /** Probe period in ms (OWNER_PROBE_MS): the owners the last pass found alive, asked again; 0 = no probe. */
  probeMs?: number;
  /** BullMQ's MAX_STALLED_COUNT: a requeue counts as a stall. */
  maxStalledCount: number;
}

export interface WatchedWorker {
  shard: number;
  /** A BullMQ Worker (its `id` prefixes the lock tokens it makes). */
  worker: { id: string };
}

interface Owner extends WatchedWorker {
  base: string;
  /** The owner (connection and server) the worker's tokens name now. */
  owner?: string;
}

export interface OwnerWatchDeps {
  redis: RedisClient;
  keys: KeySpace;
  log: Logger;
  metrics: Metrics;
}

export class OwnerWatch {
  private readonly owners: Owner[];
  private timer?: NodeJS.Timeout;
  private probeTimer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private probing?: Promise<void>;
  /** A pass asked for while one runs (the probe found an owner gone): it runs again as soon as it ends. */
  private again = false;
  private stopped = false;
  /** What the probe asks about, by node: this process's neighbours among the owners the last pass found alive. */
  private alive = new Map<Redis, string[]>();
  /** How many times less often than its period each duty runs here: watchSpread of the owners the last pass found. */
  private spread = 1;
  /** A failing tick logs once per streak (a Redis restart would otherwise log 10 lines a second). */
  private failing = false;
  /** The connections whose reconnection starts a pass (listened to from the first rename on them). */
  private readonly listening = new Set<Redis>();
  /**
   * A connection came back (ioredis `ready`): a pass at once renames the workers on it, so the jobs they fetch name the
   * connection they hold. The passes of a spread watcher are up to spread periods apart, and until the rename a watcher
   * takes those jobs back as a dead owner's.
   */
  private readonly reconnected = (): void => {
    if (this.timer !== undefined && !this.stopped) this.pass();
  };

  constructor(
    private readonly d: OwnerWatchDeps,
    workers: WatchedWorker[],
    private readonly opts: OwnerWatchOptions,
  ) {
    this.owners = workers.map((w) => ({ ...w, base: w.worker.id }));
  }

  /** Names every worker's lock tokens after its current connection. Call before the workers run. */
  async name(): Promise<void> {
    for (const o of this.owners) await this.rename(o, await this.nodeOf(o.shard));
  }

  /** Starts polling (no-op with intervalMs 0). */
  start(): void {
    if (this.opts.intervalMs <= 0 || this.timer || this.stopped) return;
    this.timer = setTimeout(() => this.pass(), this.opts.intervalMs).unref();
    const probeMs = this.opts.probeMs ?? 0;
    if (probeMs > 0) {
      const probe = () => {
        this.probing = this.probe().finally(() => {
          if (!this.stopped) this.probeTimer = setTimeout(probe, this.spreadDelay(probeMs)).unref();
        });
      };
      this.probeTimer = setTimeout(probe, probeMs).unref();
    }
  }

  /**
   * The wait before the next run of a duty of period `ms`: the period itself at a spread of 1; else spread periods on
   * average, drawn between half and one and a half of that, so that the node's watchers take turns rather than all
   * waking together.
   */
  private spreadDelay(ms: number): number {
    return this.spread === 1 ? ms : ms * this.spread * (0.5 + Math.random());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.probeTimer);
    for (const node of this.listening) node.off('ready', this.reconnected);
    await Promise.all([this.running, this.probing]);
  }

  /** One pass now (or right after the one running), then the next one an interval later. */
  private pass(): void {
    // A probe in flight when the watch stops must not start a pass on connections being closed.
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.tick().finally(() => {
      this.running = undefined;
      if (this.stopped) return;
      if (this.again) {
        this.again = false;
        return this.pass();
      }
      this.timer = setTimeout(() => this.pass(), this.spreadDelay(this.opts.intervalMs)).unref();
    });
  }

  /** Whether every owner the last pass found alive still is; a pass at once when one is gone. */
  async probe(): Promise<void> {
    try {
      for (const [node, owners] of this.alive) {
        if (owners.length === 0) continue;
        const alive = await liveOwners(node, owners);
        if (alive.size < owners.length) return void this.pass();
      }
    } catch {
      // The pass reports a failing Redis (once per streak); a probe that fails only waits for it.
    }
  }

  /**
   * Whether a token this process holds names the connection its worker uses now.
   * A job locked under a connection that has since been replaced will be taken
   * by a watcher; the worker should not fetch its next job with that token.
   */
  isCurrent(token: string): boolean {
    const owner = ownerOfToken(token);
    return owner === undefined || this.owners.some((o) => o.owner === owner);
  }

  /** A worker replaced by a new one (src/worker/fetchWatch.ts): the new one named after its connection, then watched. */
  async replace(old: { id: string }, fresh: { id: string }): Promise<void> {
    const o = this.owners.find((x) => x.worker === old);
    if (!o) return;
    o.worker = fresh;
    o.base = fresh.id;
    delete o.owner;
    await this.rename(o, await this.nodeOf(o.shard));
  }

  private nodeOf(shard: number): Promise<Redis> {
    return nodeForKey(this.d.redis, this.d.keys.queueStateKeys(shard).active);
  }

  private async rename(o: Owner, node: Redis): Promise<void> {
    if (!this.listening.has(node) && !this.stopped) {
      this.listening.add(node);
      node.on('ready', this.reconnected);
    }
    const owner = await ownerOfConnection(node);
    if (owner === o.owner) return;
    const previous = o.owner;
    nameWorkerOwner(o.worker, o.base, owner);
    o.owner = owner;
    if (previous !== undefined) {
      this.d.log.warn(
        { code: 'owner_connection_changed', shard: o.shard, previous, owner },
        'redis connection replaced: jobs locked under the old one will be requeued by a watcher',
      );
    }
  }

  /** One pass over the shards: rename after a reconnection, then requeue the jobs of vanished clients. */
  async tick(): Promise<void> {
    const seen = new Map<Redis, Set<string>>();
    const mine = new Map<Redis, string[]>();
    try {
      for (const o of this.owners) {
        const node = await this.nodeOf(o.shard);
        await this.rename(o, node);
        if (o.owner !== undefined) (mine.get(node) ?? mine.set(node, []).get(node)!).push(o.owner);
        const owners = await activeOwners(node, this.d.keys, o.shard, this.opts.intervalMs);
        if (owners.length === 0) continue;
        const alive = await liveOwners(node, owners);
        const others = seen.get(node) ?? seen.set(node, new Set()).get(node)!;
        for (const owner of alive) if (!this.owners.some((x) => x.owner === owner)) others.add(owner);
        for (const dead of owners.filter((owner) => !alive.has(owner))) {
          const moved = await requeueDeadOwner(node, this.d.keys, o.shard, dead, this.opts.maxStalledCount);
          if (moved.length === 0) continue;
          this.d.metrics.deadOwnerRequeues.inc(moved.length);
          this.d.log.warn(
            { code: 'owner_gone', shard: o.shard, owner: dead, jobIds: moved },
            'jobs of a vanished connection moved back to wait',
          );
        }
      }
      this.failing = false;
      // The node with the fewest owners sets it: no node is watched less often than its own fleet's size allows.
      const spreads = [...seen].map(([node, others]) => watchSpread(others.size + new Set(mine.get(node)).size));
      this.spread = spreads.length > 0 ? Math.min(...spreads) : 1;
      this.alive = new Map(
        [...seen].map(([node, others]) => [
          node,
          probeTargets(mine.get(node) ?? [], others, PROBE_FANOUT * this.spread),
        ]),
      );
    } catch (err) {
      this.d.metrics.ownerWatchErrors.inc();
      if (!this.failing)
        this.d.log.warn(
          { code: 'owner_watch_failed', err },
          'owner watch tick failed (retrying every tick; lock expiry still recovers)',
        );
      this.failing = true;
    }
  }
}

/** How many neighbours each process's probe asks about: a death is noticed by that many probes, whichever die with it. */
export const PROBE_FANOUT = 2;

/** About how many of a node's watchers pass (and probe) within each period, however many there are. */
export const WATCH_SPREAD = 8;

/**
 * How many times less often than its period each watcher passes and probes on a node with `owners` owners (its own
 * included): 1 below 2 x WATCH_SPREAD owners, then one more for each WATCH_SPREAD.
 */
export function watchSpread(owners: number): number {
  return Math.max(1, Math.floor(owners / WATCH_SPREAD));
}

/**
 * The owners `mine` probe: in the ring of `mine` and `others` sorted, the `fanout` owners of `others` that follow each
 * of `mine` (all of `others` when there are no more). Every watcher sorts the same owners (one shared scan), so each
 * owner is probed by the owners before it in the ring.
 */
export function probeTargets(mine: readonly string[], others: ReadonlySet<string>, fanout: number): string[] {
  if (others.size <= fanout || mine.length === 0) return [...others];
  const ring = [...new Set([...others, ...mine])].sort();
  const targets = new Set<string>();
  for (const own of new Set(mine)) {
    const at = ring.indexOf(own);
    let found = 0;
    for (let step = 1; step < ring.length && found < fanout; step++) {
      const next = ring[(at + step) % ring.length]!;
      if (others.has(next)) {
        targets.add(next);
        found++;
      }
    }
  }
  return [...targets];
}
