/**
 * One Redis reader per process (per shard) for every live event stream this
 * process serves, fanned out to its viewers. A viewer costs no connection of
 * its own: 300 viewers used to hold 300 connections (each an XREAD BLOCK) and
 * could lock workers out at Redis `maxclients`.
 *
 * Per shard one duplicated connection blocks in XREAD over every watched
 * stream of that shard (the streams share the shard's hash tag, so one
 * XREAD is legal on a Cluster), plus a wake stream of this process: a viewer
 * of a stream not yet watched XADDs to it so the blocked read restarts with
 * the new stream at once. The reader closes when its shard's last viewer goes.
 *
 * A viewer that joins (or resumes after Last-Event-ID) catches up with XRANGE
 * on the shared command connection while live entries are buffered, then
 * gets every event after its position, each once and in order. Entries are
 * expanded into events by src/store/runEvents.ts; a position inside an entry
 * (a resume from one of its events) reads that entry again and skips the
 * events before it.
 * Past `maxViewers` join() returns undefined: the route answers 503.
 */
import { randomUUID } from 'node:crypto';
import { ReplyError } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisClient } from '../../store/connect.js';
import type { KeySpace } from '../../store/keys.js';
import { decodeEntries, isAfter, readEventsAfter, type EventPosition, type RunEvent } from '../../store/runEvents.js';
import type { RunStatus } from '../../core/status.js';
import { readStatus } from '../../store/runRecord.js';

export interface ViewerSink {
  /** Events after the viewer's position, in order, each once. */
  write(events: RunEvent[]): void;
  /** Nothing arrived for a while: a keep-alive is due, and `status` is the run's status (null: gone). */
  idle(status: RunStatus | null): void;
  /** The reader failed for good (the viewer should end). */
  fail(err: unknown): void;
}

export interface Viewer {
  /** Writes whatever the stream holds after the viewer's last id (before ending on a terminal status). */
  drain(): Promise<void>;
  leave(): void;
}

export interface FanoutOptions {
  /** XREAD BLOCK time; after each quiet period every viewer gets idle(). */
  blockMs: number;
  maxViewers: number;
}

type XReadReply = [string, [string, string[]][]][] | null;

/**
 * The position after `events`, the tail of whole entries: past their last entry, so the next read of the
 * stream starts after it (exclusive).
 */
function past(events: RunEvent[]): EventPosition {
  return { entry: events[events.length - 1]!.entry, index: Infinity };
}

class ViewerState implements Viewer {
  /** Live events held while the catch-up read runs; undefined once caught up. */
  buffer: RunEvent[] | undefined = [];
  closed = false;
  constructor(
    readonly runId: string,
    readonly stream: string,
    public last: EventPosition,
    readonly sink: ViewerSink,
    private readonly onLeave: (v: ViewerState) => void,
    private readonly read: (v: ViewerState) => Promise<void>,
  ) {}

  drain(): Promise<void> {
    return this.read(this);
  }

  deliver(events: RunEvent[]): void {
    if (this.closed) return;
    if (this.buffer) return void this.buffer.push(...events);
    const fresh = events.filter((e) => isAfter(e, this.last));
    if (fresh.length === 0) return;
    this.last = past(fresh);
    this.sink.write(fresh);
  }

  leave(): void {
    if (this.closed) return;
    this.closed = true;
    this.onLeave(this);
  }
}

class ShardReader {
  readonly streams = new Map<string, { cursor: string; viewers: Set<ViewerState>; runId: string }>();
  private conn: RedisClient | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private blocked = false;
  private stopped = false;
  private wakeCursor = '0-0';

  constructor(
    private readonly hub: EventFanout,
    readonly wakeKey: string,
  ) {}

  add(v: ViewerState): boolean {
    let s = this.streams.get(v.stream);
    const isNew = !s;
    if (!s) {
      // XREAD reads after whole entries: the rest of an entry the viewer stands inside comes from its catch-up.
      s = { cursor: v.last.entry, viewers: new Set(), runId: v.runId };
      this.streams.set(v.stream, s);
    }
    s.viewers.add(v);
    if (!this.conn) this.start();
    return isNew;
  }

  remove(v: ViewerState): void {
    const s = this.streams.get(v.stream);
    if (!s) return;
    s.viewers.delete(v);
    if (s.viewers.size === 0) this.streams.delete(v.stream);
    if (this.streams.size === 0) this.stop();
  }

  get isBlocked(): boolean {
    return this.blocked;
  }

  private start(): void {
    this.stopped = false;
    this.conn = (this.hub.redis as { duplicate(): RedisClient }).duplicate();
    this.conn.on('error', () => {}); // failures surface through the read below
    // Keep-alives and status checks for every watched stream, busy or quiet.
    this.ticker = setInterval(() => void this.idle(), this.hub.opts.blockMs).unref();
    void this.loop(this.conn);
  }

  private stop(): void {
    this.stopped = true;
    clearInterval(this.ticker);
    this.conn?.disconnect();
    this.conn = undefined;
    void this.hub.redis.del(this.wakeKey).catch(() => {});
  }

  private async loop(conn: RedisClient): Promise<void> {
    let failures = 0;
    while (!this.stopped && this.conn === conn) {
      const keys = [...this.streams.keys()];
      const ids = keys.map((k) => this.streams.get(k)!.cursor);
      let reply: XReadReply;
      try {
        this.blocked = true;
        reply = await conn.xread(
          'COUNT',
          100,
          'BLOCK',
          this.hub.opts.blockMs,
          'STREAMS',
          ...keys,
          this.wakeKey,
          ...ids,
          this.wakeCursor,
        );
        failures = 0;
      } catch (err) {
        if (this.stopped || this.conn !== conn) return;
        // Redis refused the command: a stream it cannot read is its own viewers' failure, not the shard's.
        if (err instanceof ReplyError && (await this.dropRefused(keys, ids))) continue;
        if (this.stopped || this.conn !== conn) return;
        if (++failures >= 5) {
          this.hub.log.warn({ code: 'sse_read_failed', err }, 'event stream reader failed');
          for (const s of [...this.streams.values()]) for (const v of [...s.viewers]) v.sink.fail(err);
          return;
        }
        await new Promise((r) => setTimeout(r, 100 * failures));
        continue;
      } finally {
        this.blocked = false;
      }
      if (this.stopped || this.conn !== conn) return;
      if (!reply) continue;
      for (const [key, raw] of reply) {
        if (raw.length === 0) continue;
        if (key === this.wakeKey) {
          this.wakeCursor = raw[raw.length - 1]![0];
          continue;
        }
        const s = this.streams.get(key);
        if (!s) continue;
        s.cursor = raw[raw.length - 1]![0];
        const events = decodeEntries(raw);
        for (const v of [...s.viewers]) v.deliver(events);
      }
    }
  }

  /**
   * Reads each stream at its cursor on its own (one pipeline, nothing blocks) after Redis refused the shared XREAD:
   * the viewers of a stream it refuses (its key not a stream, a cursor it does not take) fail and the stream is
   * no longer watched, so one bad stream never ends every viewer of the shard. True when one was dropped.
   */
  private async dropRefused(keys: string[], ids: string[]): Promise<boolean> {
    let replies: [Error | null, unknown][];
    try {
      replies =
        (await this.hub.redis.pipeline(keys.map((k, i) => ['xread', 'COUNT', 1, 'STREAMS', k, ids[i]!])).exec()) ?? [];
    } catch {
      return false;
    }
    let dropped = false;
    keys.forEach((key, i) => {
      const err = replies[i]?.[0];
      const s = this.streams.get(key);
      if (!(err instanceof ReplyError) || !s || s.cursor !== ids[i]) return;
      dropped = true;
      this.hub.log.warn({ code: 'sse_stream_refused', runId: s.runId, err }, 'event stream refused by Redis');
      this.streams.delete(key);
      for (const v of [...s.viewers]) v.sink.fail(err);
    });
    if (dropped && this.streams.size === 0) this.stop();
    return dropped;
  }

  private async idle(): Promise<void> {
    for (const s of [...this.streams.values()]) {
      let status: RunStatus | null;
      try {
        status = (await readStatus(this.hub.redis, this.hub.keys, s.runId)) ?? null;
      } catch {
        continue; // Redis unreachable: the next idle tick asks again
      }
      for (const v of [...s.viewers]) if (!v.buffer) v.sink.idle(status);
    }
  }
}

export class EventFanout {
  private readonly readers = new Map<number, ShardReader>();
  private readonly id = randomUUID();
  private count = 0;

  constructor(
    readonly redis: RedisClient,
    readonly keys: KeySpace,
    readonly log: Logger,
    readonly opts: FanoutOptions,
  ) {}

  /** Live viewers now. */
  get viewers(): number {
    return this.count;
  }

  /**
   * Follows the run's events after position `last` (exclusive). Undefined when
   * the process already serves maxViewers streams.
   */
  async join(runId: string, last: EventPosition, sink: ViewerSink): Promise<Viewer | undefined> {
    if (this.count >= this.opts.maxViewers) return undefined;
    this.count++;
    const shard = this.keys.shardOf(runId);
    let reader = this.readers.get(shard);
    if (!reader) {
      reader = new ShardReader(this, this.keys.sseWake(shard, this.id));
      this.readers.set(shard, reader);
    }
    const r = reader;
    const v = new ViewerState(
      runId,
      this.keys.run(runId).events,
      last,
      sink,
      (gone) => {
        this.count--;
        r.remove(gone);
      },
      (x) => this.readAfter(x),
    );
    const isNew = r.add(v);
    // A blocked read does not see a stream added after it started: wake it.
    if (isNew && r.isBlocked)
      await this.redis
        .xadd(r.wakeKey, 'MAXLEN', '1', '*', 'w', '1')
        .then(() => this.redis.pexpire(r.wakeKey, 3600_000))
        .catch(() => {});
    await this.catchUp(v);
    return v;
  }

  /** XRANGE after the viewer's position until the end, then the buffered live events. */
  private async catchUp(v: ViewerState): Promise<void> {
    try {
      await this.readAfter(v);
    } catch (err) {
      if (!v.closed) v.sink.fail(err);
      return;
    }
    const held = v.buffer ?? [];
    v.buffer = undefined;
    v.deliver(held);
  }

  /** The packed events of an ended run first (src/store/runEvents.ts), then the stream's, 100 entries a read. */
  private async readAfter(v: ViewerState): Promise<void> {
    for (;;) {
      const { events, entries } = await readEventsAfter(this.redis, this.keys.run(v.runId), v.last, 100);
      if (v.closed) return;
      if (events.length > 0) {
        v.last = past(events);
        v.sink.write(events);
      }
      if (entries < 100) return;
    }
  }
}
