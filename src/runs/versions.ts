/**
 * The registry of agent versions live workers serve: one zset per agent name
 * (KeySpace.agentVersions), one member per (worker, version), scored by the
 * time the announcement lapses. A worker renews its announcements every
 * VERSION_HEARTBEAT_MS (src/worker/versionGate.ts) and withdraws them when it
 * stops; one that dies without withdrawing still counts as serving until its
 * announcement lapses (VERSION_TTL_MS), and a step handed back to it meanwhile
 * only waits: after the lapse the next worker that meets the step parks it.
 *
 * Read by the worker (hand a step back, or park it?) and by the operator API
 * (which versions a parked run can continue under, and their tool names).
 */
import { z } from 'zod';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { announceVersion } from '../store/calls/announceVersion.js';

/** What one worker announces for one agent. */
export interface Announcement {
  worker: string;
  version: string;
  toolsHash: string;
  /** The version's tool names, so an operator's continue can say which tools vanished. */
  tools: readonly string[];
  /** The step-queue shards the worker consumes (WORKER_SHARDS): a run on another shard is not served by it. */
  shards: readonly number[];
}

/** One version live workers serve, with the workers announcing it. */
export interface ServedVersion {
  version: string;
  toolsHash: string;
  tools: string[];
  workers: string[];
  /** The shards some worker of this version consumes. */
  shards: number[];
}

/** Validated when read back: a member another build wrote in another shape is skipped, never trusted. */
const memberSchema = z
  .object({
    w: z.string(),
    v: z.string(),
    t: z.string(),
    n: z.array(z.string()),
    s: z.array(z.number().int().nonnegative()),
  })
  .strict();

/**
 * The member of an announcement: the same string on every renewal (the zset keeps one entry per worker and version).
 */
export function announcementMember(a: Announcement): string {
  return JSON.stringify({ w: a.worker, v: a.version, t: a.toolsHash, n: [...a.tools], s: [...a.shards] });
}

/** `version/toolsHash`, how reasons and lists name a version. */
export const versionLabel = (version: string, toolsHash: string): string => `${version}/${toolsHash}`;

export class VersionRegistry {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Announces (or renews) one version of `agent` for ttlMs. */
  async announce(agent: string, a: Announcement): Promise<void> {
    await announceVersion(
      this.redis,
      { registry: this.keys.agentVersions(agent) },
      { member: announcementMember(a), now: this.now(), ttlMs: this.ttlMs },
    );
  }

  /**
   * Withdraws an announcement at once (a stopping worker): steps of that version park instead of bouncing until the
   * lapse.
   */
  async withdraw(agent: string, a: Announcement): Promise<void> {
    await this.redis.zrem(this.keys.agentVersions(agent), announcementMember(a));
  }

  /** The versions of `agent` live workers serve now, grouped by (version, tools hash), sorted by version label. */
  async served(agent: string): Promise<ServedVersion[]> {
    const members = await this.redis.zrangebyscore(this.keys.agentVersions(agent), this.now(), '+inf');
    const byLabel = new Map<string, ServedVersion>();
    for (const raw of members) {
      let parsed: z.infer<typeof memberSchema>;
      try {
        parsed = memberSchema.parse(JSON.parse(raw));
      } catch {
        continue;
      }
      const label = versionLabel(parsed.v, parsed.t);
      const entry = byLabel.get(label) ?? {
        version: parsed.v,
        toolsHash: parsed.t,
        tools: parsed.n,
        workers: [],
        shards: [],
      };
      entry.workers.push(parsed.w);
      for (const shard of parsed.s) if (!entry.shards.includes(shard)) entry.shards.push(shard);
      byLabel.set(label, entry);
    }
    return [...byLabel.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  }
}
