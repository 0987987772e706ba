/**
 * A shard whose fetch loop stopped. Each shard of a worker process is consumed by one BullMQ worker, whose loop
 * fetches the next job (blocking on the queue's marker, then moving a job to active). After a Redis failover that
 * loop can stop for good while every command around it works again: on a Cluster with replicas the failover
 * campaign left runs `queued` with their jobs in `wait` and no process fetching them (docs/failover.md); BullMQ's
 * own issues describe the same after failovers. Nothing else would notice: the jobs are where BullMQ fetches them,
 * so no stall check, owner watch or stuck-run sweep moves them.
 *
 * So every FETCH_STALL_MS / 2 the watch asks, for each shard whose worker has not started a job for FETCH_STALL_MS
 * and holds fewer jobs than its concurrency (a busy worker is not a stopped one), whether its queue has jobs ready
 * (in `wait` or `prioritized`, or due in `delayed`). If so the loop has stopped: the shard's BullMQ worker is replaced
 * by a new one (`fetch_loop_restarted`, `agent_fetch_loop_restarts_total`, with where the old loop stood). The old one
 * is closed without waiting: the jobs it still holds finish or stall and are delivered again, fenced like any
 * redelivery. An idle shard (nothing ready) counts as fetching.
 *
 * `prioritized` counts because flow control's step order (src/flow/stepPriority.ts, on by default) puts the step
 * jobs of tenants above level 1 there, not in `wait`. Counting only `wait`, the watch took a stopped shard
 * under flow control for an idle one: the Cluster failover campaign left runs holding their slot with their step 1
 * job prioritized, taken by no worker until their deadline (docs/failover.md).
 */
import type { Logger } from 'pino';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import type { Metrics } from '../metrics/metrics.js';
import { PassLoop } from '../core/passLoop.js';

export interface FetchWatchDeps {
  redis: RedisClient;
  keys: KeySpace;
  log: Logger;
  metrics: Metrics;
  /** FETCH_STALL_MS (0: off) and the jobs a shard's worker may hold at once. */
  stallMs: number;
  concurrency: number;
  /** Jobs this process holds on a shard now. */
  heldOn(shard: number): number;
  /** Replaces the shard's BullMQ worker by a new one. */
  restart(shard: number): Promise<void>;
  /** Where the shard's stopped loop stands (logged with its restart: what a post-mortem of the stop starts from). */
  loopState?(shard: number): unknown;
}

export class FetchWatch {
  private readonly lastFetch = new Map<number, number>();
  private readonly loop: PassLoop;

  constructor(
    private readonly d: FetchWatchDeps,
    private readonly shards: readonly number[],
  ) {
    const now = Date.now();
    for (const s of shards) this.lastFetch.set(s, now);
    this.loop = new PassLoop({
      pass: () => this.tick(),
      intervalMs: d.stallMs / 2,
      onError: (err) => d.log.warn({ code: 'fetch_watch_failed', err }, 'fetch watch tick failed'),
      pauseFirst: true,
      unref: true,
    });
  }

  /** The shard's worker started a job or found its queue empty: its loop runs. */
  fetched(shard: number, at = Date.now()): void {
    this.lastFetch.set(shard, at);
  }

  start(): void {
    if (this.d.stallMs > 0) this.loop.start();
  }

  /** No tick after it; the one in flight ends first. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  async tick(now = Date.now()): Promise<void> {
    for (const shard of this.shards) {
      if (now - (this.lastFetch.get(shard) ?? now) < this.d.stallMs) continue;
      if (this.d.heldOn(shard) >= this.d.concurrency) continue;
      if (!(await this.ready(shard, now))) {
        this.fetched(shard, now);
        continue;
      }
      this.d.metrics.fetchLoopRestarts.inc();
      this.d.log.warn(
        {
          code: 'fetch_loop_restarted',
          shard,
          idleMs: now - this.lastFetch.get(shard)!,
          loop: this.d.loopState?.(shard),
        },
        "shard's worker fetched nothing while jobs were ready: replaced by a new one",
      );
      this.fetched(shard, now);
      await this.d.restart(shard);
    }
  }

  /**
   * Whether the shard's queue has a job to fetch, wherever BullMQ's fetch (moveToActive) takes one from: the wait
   * list, the prioritized set (under flow control's step order, the step jobs of tenants above level 1,
   * src/flow/stepPriority.ts), or a delayed job that is due (BullMQ scores ms x 4096).
   */
  private async ready(shard: number, now: number): Promise<boolean> {
    const prefix = this.d.keys.queueKeyPrefix(shard);
    const [waiting, prioritized, due] = await Promise.all([
      this.d.redis.llen(`${prefix}wait`),
      this.d.redis.zcard(`${prefix}prioritized`),
      this.d.redis.zcount(`${prefix}delayed`, 0, now * 4096),
    ]);
    return waiting > 0 || prioritized > 0 || due > 0;
  }
}
