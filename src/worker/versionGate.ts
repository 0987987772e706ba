/**
 * Which agent versions this worker serves, their announcement in the registry
 * (src/runs/versions.ts), and the verdict on a step of a run pinned to a version
 * it does not serve:
 *  - some live worker announces that exact version (and tools hash): hand the
 *    step back (the caller delays the job VERSION_HANDBACK_DELAY_MS; it is no
 *    attempt), so an old and a new version run side by side during a rollout;
 *  - none does: park the run needs_human / `version_mismatch: pinned <v>/<hash>
 *    served <v>/<hash>,...` (the version queue: an operator continues it under a
 *    served version or cancels it); `unknown_agent: <name>` when no worker
 *    serves the agent at all and this one does not load it.
 * If the registry cannot be read, the verdict throws: the delivery fails and the
 * job's attempts decide, as for any Redis failure.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Agent, AgentCatalog } from '../core/agent.js';
import { ConfigError } from '../core/errors.js';
import type { RunSpec } from '../runs/spec.js';
import { versionLabel, type Announcement, type VersionRegistry } from '../runs/versions.js';

/** What the gate reads of the configuration (defaults in src/config/config.ts). */
export interface VersionGateOptions {
  /** Versions served (empty: every loaded agent's). */
  readonly WORKER_AGENT_VERSIONS: readonly string[];
  readonly VERSION_HEARTBEAT_MS: number;
  readonly VERSION_HANDBACK_DELAY_MS: number;
}

export type VersionVerdict = { kind: 'hand_back'; delayMs: number } | { kind: 'park'; reason: string };

/** Served versions named in a park reason, at most this many (the reason stays short). */
const REASON_VERSIONS_MAX = 3;

export class VersionGate {
  /** This process's id in the registry: host, pid and a random suffix (a restarted pid is another worker). */
  readonly workerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** The agents this worker serves, by name. */
  private readonly serving = new Map<string, Agent>();
  private timer: NodeJS.Timeout | undefined;

  /** Throws ConfigError (WORKER_AGENT_VERSIONS) when a listed version is not the version of any loaded agent. */
  constructor(
    private readonly agents: AgentCatalog,
    private readonly registry: VersionRegistry,
    private readonly opts: VersionGateOptions,
    private readonly log: Logger,
    /** The shards this worker consumes, announced with its versions; `shardOf` places a run. */
    private readonly shards: readonly number[] = [],
    private readonly shardOf: (runId: string) => number = () => 0,
  ) {
    const listed = new Set(opts.WORKER_AGENT_VERSIONS);
    const loaded = new Set(agents.all.map((a) => a.version));
    const unknown = [...listed].filter((v) => !loaded.has(v));
    if (unknown.length > 0) {
      throw new ConfigError(
        ['WORKER_AGENT_VERSIONS'],
        `invalid configuration: WORKER_AGENT_VERSIONS: ${unknown.join(', ')} is the version of no loaded agent (loaded: ${[...loaded].join(', ')})`,
      );
    }
    for (const a of agents.all) if (listed.size === 0 || listed.has(a.version)) this.serving.set(a.name, a);
  }

  /** The versions announced, as `version/toolsHash` labels. */
  get servedLabels(): string[] {
    return [...this.serving.values()].map((a) => versionLabel(a.version, a.tools.schemaHash));
  }

  /**
   * The agent that runs `spec` here: the one served under its name, at its pinned version and tools hash; else
   * undefined.
   */
  agentFor(spec: RunSpec): Agent | undefined {
    const a = this.serving.get(spec.agent);
    return a && a.version === spec.agentVersion && a.tools.schemaHash === spec.toolsHash ? a : undefined;
  }

  /** For a spec agentFor() refused: hand the step back, or park the run (with its reason). */
  async verdict(spec: RunSpec): Promise<VersionVerdict> {
    // Served for this run: by a worker that consumes the run's shard (a version served only elsewhere cannot take its
    // steps).
    const shard = this.shardOf(spec.runId);
    const served = (await this.registry.served(spec.agent)).filter((s) => s.shards.includes(shard));
    const exact = served.some(
      (s) =>
        s.version === spec.agentVersion && s.toolsHash === spec.toolsHash && s.workers.some((w) => w !== this.workerId),
    );
    if (exact) return { kind: 'hand_back', delayMs: this.opts.VERSION_HANDBACK_DELAY_MS };
    if (served.length === 0 && !this.agents.get(spec.agent))
      return { kind: 'park', reason: `unknown_agent: ${spec.agent}` };
    const labels = served.map((s) => versionLabel(s.version, s.toolsHash));
    const named =
      labels.length === 0
        ? 'none'
        : labels.slice(0, REASON_VERSIONS_MAX).join(',') + (labels.length > REASON_VERSIONS_MAX ? ',...' : '');
    return {
      kind: 'park',
      reason: `version_mismatch: pinned ${versionLabel(spec.agentVersion, spec.toolsHash)} served ${named}`,
    };
  }

  /**
   * Announces the served versions now, then every VERSION_HEARTBEAT_MS until stop(). Resolves after the first
   * announcement.
   */
  async start(): Promise<void> {
    await this.announceAll();
    this.timer ??= setInterval(() => {
      this.announceAll().catch((err: unknown) =>
        this.log.warn(
          { code: 'version_announce_failed', err },
          'served versions not renewed (they lapse after VERSION_TTL_MS)',
        ),
      );
    }, this.opts.VERSION_HEARTBEAT_MS);
    this.timer.unref();
  }

  /** Stops renewing and withdraws the announcements (best effort: unwithdrawn ones lapse after VERSION_TTL_MS). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all(
      [...this.serving.values()].map((a) => this.registry.withdraw(a.name, this.announcement(a))),
    ).catch((err: unknown) => {
      this.log.warn(
        { code: 'version_withdraw_failed', err },
        'served versions not withdrawn (they lapse after VERSION_TTL_MS)',
      );
    });
  }

  private async announceAll(): Promise<void> {
    await Promise.all([...this.serving.values()].map((a) => this.registry.announce(a.name, this.announcement(a))));
  }

  private announcement(a: Agent): Announcement {
    return {
      worker: this.workerId,
      version: a.version,
      toolsHash: a.tools.schemaHash,
      tools: a.tools.tools.map((t) => t.name),
      shards: this.shards,
    };
  }
}
