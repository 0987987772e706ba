/**
 * The one module that owns every Redis key name.
 *
 * All keys of one run carry the run's shard hash tag `{N}`, and so does the
 * shard's BullMQ queue (`steps-{N}`), so every multi-key script and every
 * BullMQ operation of a run stays in one Redis Cluster slot.
 */
import { hash } from 'node:crypto';

export const QUEUE_BASENAME = 'steps';

/**
 * The hex sha256 of a key's text. One-shot (crypto.hash): a create names its run, subject, search terms and shard by
 * several digests, and a Hash object per digest (createHash) cost about three times as much CPU as the digest itself.
 */
const sha256Hex = (text: string): string => hash('sha256', text, 'hex');

/** Stable shard of a run: sha256(runId) mod shards. Never depends on the clock or the worker. */
export function shardOf(runId: string, shards: number): number {
  return hash('sha256', runId, 'buffer').readUInt32BE(0) % shards;
}

/** BullMQ queue of schedule ticks (job schedulers); its keys share the `{schedules}` tag. */
export const SCHEDULES_QUEUE = 'schedules-{schedules}';

export const tagOf = (shard: number): string => `{${shard}}`;
export const queueNameOf = (shard: number): string => `${QUEUE_BASENAME}-${tagOf(shard)}`;

/** Deterministic step job id: one job per (run, step). */
export const stepJobId = (runId: string, step: number): string => `${runId}.s${step}`;

/** The run of a step job id (`<runId>.s<step>` or a resume's `<runId>.s<step>.r<n>`), or undefined. */
export function runIdOfStepJob(jobId: string): string | undefined {
  return /^(.+)\.s\d+(?:\.r\d+)?$/.exec(jobId)?.[1];
}

/**
 * Where a step job stands in its run's life, [step, resume] (`.r<n>`, 0 without): a later job of the run has a
 * larger one (a wake's job is the step after the park's; a resume or retry at the same step a larger n). Flow
 * control's slots are recorded with it (src/flow/admission.ts), so a release sent for an older job frees nothing.
 */
export function stepJobGeneration(jobId: string): [step: number, resume: number] {
  const m = /\.s(\d+)(?:\.r(\d+))?$/.exec(jobId);
  return m ? [Number(m[1]), Number(m[2] ?? 0)] : [0, 0];
}

export interface RunKeys {
  /** hash: status, cursor, tenant, agent, key, versions, reason */
  run: string;
  /** hash: limits and usage (steps, tokens, wall clock deadline) */
  budget: string;
  /** list: journal entries, appended one by one, never rewritten */
  journal: string;
  /**
   * string: an ended run's journal, packed (packJournal, src/core/journal.ts), the list gone; entries appended after
   * it (an operator's action on the ended run) go to the list and follow it (src/store/runJournal.ts reads both).
   * `<journal>-packed`: includes/expireRun.lua derives it from the journal key (change both together).
   */
  journalPacked: string;
  /** stream: run events for live views (SSE) */
  events: string;
  /**
   * string: an ended run's events, packed (src/store/runEvents.ts), the stream trimmed to none. `<events>-packed`:
   * includes/expireRun.lua derives it from the events key (change both together).
   */
  eventsPacked: string;
  /** set: action ids of this run's ledger entries */
  actions: string;
  /** set: run ids of the child runs its agent tools started (src/runs/children.ts) */
  children: string;
  /**
   * hash: hand-off digest (sha256 of the run id, agent tool and its identifying arguments) -> the run id of the
   * child that hand-off started (src/runs/children.ts): ids and digests only. It lives as the `children` set does:
   * written with it, with a TTL past the parent's deadline, then from the run's end as the run's keys (the
   * retention, none while it is held or waits for its archive row, none again once it is retried:
   * lua/includes/expireRun.lua); erasure deletes it.
   */
  handoffs: string;
}

/** Flow control's keys (KeySpace.flow): one hash tag, one slot. */
export interface FlowKeys {
  /** hash: run id -> JSON of a run waiting in its tenant's line (tenant, agent, shard, priority, at) */
  waiting: string;
  /** hash: run id -> JSON of a run holding a slot (as waiting, plus admittedAt) */
  held: string;
  /** hash: run id -> CLIENT ID of the connection that admitted it, until its step job is released to the queue */
  pending: string;
  /** hash: `t:<tenant>`, `a:<agent>`, `all` -> slots held */
  counts: string;
  /** zset: tenants with waiting runs -> the pass of their next turn (stride scheduling) */
  turns: string;
  /** hash: tenant -> its pass; `~vtime` -> the pass of the latest turn served */
  passes: string;
  /** hash: `w:<tenant>` weight, `t:<tenant>` / `a:<agent>` concurrency limit, set at run time */
  settings: string;
  /** hash: tenant -> runs admitted, ever */
  admitted: string;
  /** list: changes of weights and limits, newest first, with who made them */
  audit: string;
  /** string with TTL: the worker whose repair pass runs this period (src/flow/repair.ts) */
  repairLease: string;
  /** prefix of the tenants' lines (zsets) */
  linePrefix: string;
}

export class KeySpace {
  constructor(
    readonly prefix: string,
    readonly bullPrefix: string,
    readonly shards: number,
  ) {}

  private readonly shardMemo = new Map<string, number>();

  /** Memoized (a sha256 per call showed up in the step's CPU profile); bounded. */
  shardOf(runId: string): number {
    let shard = this.shardMemo.get(runId);
    if (shard === undefined) {
      shard = shardOf(runId, this.shards);
      if (this.shardMemo.size >= 10_000) this.shardMemo.clear();
      this.shardMemo.set(runId, shard);
    }
    return shard;
  }

  queueName(shard: number): string {
    return queueNameOf(shard);
  }

  private readonly runMemo = new Map<string, RunKeys>();

  /**
   * Memoized and bounded like shardOf: a step names its run's keys in each of its writes, and five new strings per
   * call (each flattened again when the command is encoded) showed in the step's allocations. Frozen: shared.
   */
  run(runId: string): RunKeys {
    let keys = this.runMemo.get(runId);
    if (keys === undefined) {
      const base = `${this.prefix}:${tagOf(this.shardOf(runId))}:run:${runId}`;
      keys = Object.freeze({
        run: base,
        budget: `${base}:budget`,
        journal: `${base}:journal`,
        journalPacked: `${base}:journal-packed`,
        events: `${base}:events`,
        eventsPacked: `${base}:events-packed`,
        actions: `${base}:actions`,
        children: `${base}:children`,
        handoffs: `${base}:handoffs`,
      });
      if (this.runMemo.size >= 10_000) this.runMemo.clear();
      this.runMemo.set(runId, keys);
    }
    return keys;
  }

  /** hash: one ledger record per side-effecting action (its history list is actionHistory). */
  action(runId: string, actionId: string): string {
    return this.actionInShard(this.shardOf(runId), actionId);
  }

  /** list: every move of an action's ledger record, with its evidence (`<action key>:history`). */
  actionHistory(actionKey: string): string {
    return `${actionKey}:history`;
  }

  actionInShard(shard: number, actionId: string): string {
    return `${this.prefix}:${tagOf(shard)}:action:${actionId}`;
  }

  /**
   * string, SET NX PX: the lease of whoever drives an action from outside a step
   * job (an operator's compensation); while it exists the action has a live owner.
   */
  actionLease(runId: string, actionId: string): string {
    return `${this.action(runId, actionId)}:driver`;
  }

  /** string, SET NX: the idempotency reservation taken before dispatch. */
  reservation(runId: string, idempotencyKey: string): string {
    return `${this.prefix}:${tagOf(this.shardOf(runId))}:idem:${idempotencyKey}`;
  }

  /**
   * string per shard, rewritten before every replication wait (src/store/replicated.ts): WAIT counts only the
   * writes of its own connection, so the wait writes this first and then covers everything the master holds.
   */
  replicaFence(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:replica-fence`;
  }

  /** zset per shard: actions needing attention (dispatched/outcome_unknown), scored by time. */
  openActions(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:open-actions`;
  }

  /** zset per shard: actions waiting for a person (needs_human), scored by time. */
  humanQueue(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:human-queue`;
  }

  /** zset per shard: actions waiting for approval, scored by expiry. */
  approvals(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:approvals`;
  }

  /**
   * hash: tenant + ':' + schedule id -> the schedule's definition (JSON, src/producer/schedules.ts), paused ones
   * included.
   */
  schedules(): string {
    return `${this.prefix}:{schedules}:definitions`;
  }

  /** The BullMQ queue whose job schedulers tick the schedules (one hash tag: its keys stay in one slot). */
  schedulesQueueName(): string {
    return SCHEDULES_QUEUE;
  }

  /** zset per shard: run ids by creation time (listing, retention). */
  runIndex(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:runs`;
  }

  /**
   * zsets per shard of the run listing (src/runs/list.ts), run id -> ms of its last status
   * change, kept by every status-changing script (src/store/lua/includes/runIndex.lua, which
   * derives the same names from the run key: change both together).
   */
  runsByStatus(shard: number, status: string): string {
    return `${this.prefix}:${tagOf(shard)}:runs-by:status:${status}`;
  }

  runsByTenant(shard: number, tenant: string, status: string): string {
    return `${this.prefix}:${tagOf(shard)}:runs-by:tenant:${tenant}:${status}`;
  }

  runsByAgent(shard: number, agent: string, status: string): string {
    return `${this.prefix}:${tagOf(shard)}:runs-by:agent:${agent}:${status}`;
  }

  /**
   * zset per shard: runs parked needs_human / version_mismatch (the version queue), run id -> ms of the
   * park. Kept by includes/runIndex.lua (indexRunStatus), which derives the same name from the run key:
   * added by the commit that parks, removed by any status change out of needs_human.
   */
  versionQueue(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:version-queue`;
  }

  /**
   * zset per agent name: the versions live workers serve (member: JSON of worker id, version, tools hash,
   * tool names; score: ms the announcement lapses at), src/runs/versions.ts. Own slot (one key per agent).
   */
  agentVersions(agent: string): string {
    return `${this.prefix}:agent-versions:${agent}`;
  }

  /** integer: bumped to end every console session of one operator (src/http/console/session.ts); own slot. */
  consoleSessionEpoch(operator: string): string {
    return `${this.prefix}:console-session-epoch:${operator}`;
  }

  /** string with TTL: one console login session (src/http/console/session.ts); own slot. */
  consoleSession(id: string): string {
    return `${this.prefix}:console-session:${id}`;
  }

  /**
   * stream per shard and API process: written to wake that process's blocked event reader
   * (src/http/operators/eventFanout.ts).
   */
  sseWake(shard: number, processId: string): string {
    return `${this.prefix}:${tagOf(shard)}:sse-wake:${processId}`;
  }

  /** string: Idempotency-Key header -> run id (own slot: keyed by tenant and key). */
  requestKey(tenant: string, key: string): string {
    const digest = sha256Hex(`${tenant}\u0000${key}`).slice(0, 32);
    return `${this.prefix}:request-key:${digest}`;
  }

  /**
   * hash: one event key of a tenant's agent (a run's wait for an event, or a delivery kept for one):
   * src/store/lua/awaitEvent-1.lua, deliverEvent-2.lua, settleEventWait-1.lua, releaseEventWait-1.lua. Scoped by
   * agent: two agents of a tenant that name the same key (`reply:<id>`) never take each other's deliveries. Own hash
   * tag: the delivery knows the tenant, agent and key, not the run.
   */
  eventKey(tenant: string, agent: string, key: string): string {
    const digest = sha256Hex(`${tenant}\u0000${agent}\u0000${key}`).slice(0, 32);
    return `${this.prefix}:event:{${digest}}`;
  }

  /**
   * string, SET PX: a delivery's event id on its event key (same hash tag) -> the answer it got, so the sender's
   * retry is answered the same and delivers nothing again (deliverEvent-2.lua).
   */
  eventIdRecord(eventKey: string, eventId: string): string {
    return `${eventKey}:id:${sha256Hex(eventId).slice(0, 32)}`;
  }

  /**
   * zset: a tenant's deliveries kept on keys no run waits on (member `<event key digest>:<bytes>`, score: when the
   * keep ends), and `:bytes` beside it (string: their payload bytes); src/store/lua/reserveKept-2.lua caps both.
   */
  keptDeliveries(tenant: string): { set: string; bytes: string } {
    const digest = sha256Hex(tenant).slice(0, 32);
    const base = `${this.prefix}:kept:{${digest}}`;
    return { set: base, bytes: `${base}:bytes` };
  }

  /**
   * string, SET NX PX: one webhook event id of a tenant's hook (and its agent) -> the run it started (own slot: keyed
   * by tenant, agent, hook and event). Scoped by hook: two hooks' senders number their events independently.
   */
  webhookEvent(tenant: string, agent: string, hook: string, eventId: string): string {
    const digest = sha256Hex(`${tenant}\u0000${agent}\u0000${hook}\u0000${eventId}`).slice(0, 32);
    return `${this.prefix}:webhook-event:${digest}`;
  }

  /**
   * string with TTL: the latest run of a subject (tenant, agent, subject key), read and
   * moved by createRun in the same change that creates the next run. It lives on the
   * subject's home shard, where every run of the subject lives (subjectShard), so the
   * script stays in one Cluster slot.
   */
  subjectLatest(tenant: string, agent: string, subjectKey: string): string {
    // One digest names both the record and the subject's event-less run (runIdFor), whose shard is the home shard.
    const digest = sha256Hex(`${tenant}\u0000${agent}\u0000${subjectKey}`);
    const home = this.shardOf(`r_${digest.slice(0, 24)}`);
    return `${this.prefix}:${tagOf(home)}:subject:${digest.slice(0, 32)}`;
  }

  /**
   * zset per shard: ended runs not yet archived (run id -> ms of the end), added by the script that ends a run when an
   * archive is configured (includes/runIndex.lua derives the same name from the run key) and removed by
   * archiveCommitted-6.lua once the run's archive row is committed.
   */
  archiveQueue(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:archive-queue`;
  }

  /**
   * zset per shard: ended runs not yet compacted (run id -> ms of the end, or of a compactor's claim's lapse), added by
   * the script that ends a run (includes/runIndex.lua derives the same name from the run key), claimed by
   * compactClaim-1.lua and removed by compactDone-1.lua (src/runs/compactor.ts).
   */
  compactQueue(shard: number): string {
    return `${this.prefix}:${tagOf(shard)}:compact-queue`;
  }

  /** Redlock resource: one archiver copies a run at a time (efficiency only; the archive's insert is idempotent). */
  archiveLease(runId: string): string {
    return `${this.run(runId).run}:archive-lease`;
  }

  /** list: every erasure (POST /v1/erasures), newest first, JSON with who asked and when; own slot. */
  erasures(): string {
    return `${this.prefix}:erasures`;
  }

  /**
   * zset per shard: the runs one search term finds (src/runs/search.ts), run id -> ms of its creation, written by
   * createRun in the same change as the run (so on the run's shard: a search reads every shard). `tenant` is the
   * run's tenant, or SEARCH_ANY_TENANT for the index an unscoped reader searches; `field` is SEARCH_SUBJECT for the
   * subject key, else an agent's search field name. The term is hashed: no customer text in a key name.
   * `:live` beside it (string): how many of its runs have not ended or are held for their archive row; while any
   * is, the index keeps no TTL (includes/searchIndex.lua).
   */
  searchIndex(shard: number, tenant: string, field: string, value: string): string {
    const digest = sha256Hex(`${tenant}\u0000${field}\u0000${value}`).slice(0, 32);
    return `${this.prefix}:${tagOf(shard)}:search:${digest}`;
  }

  /** Redlock resource: one reconciler sweeps at a time (efficiency only; the ledger's CAS keeps effects once). */
  reconcilerLeader(): string {
    return `${this.prefix}:reconciler:leader`;
  }

  /**
   * Money spent (µ$) by model attempts (leaseSpend-1.lua, settleSpend-1.lua), all under one hash tag {spend} so
   * that the tenant's, the agent's and the fleet's counters are checked and taken in one script: `day` is
   * YYYY-MM-DD, `month` YYYY-MM (UTC).
   */
  spend(tenant: string, agent: string, day: string, month: string) {
    const p = `${this.prefix}:spend:{spend}`;
    return {
      tenantDay: `${p}:tenant:${tenant}:${day}`,
      tenantMonth: `${p}:tenant:${tenant}:${month}`,
      agentDay: `${p}:agent:${agent}:${day}`,
      fleetMonth: `${p}:fleet:${month}`,
      ...this.spendReports(day, month),
    };
  }

  /** hash: the day's / the month's spend by `<tenant> <agent> <provider>/<model>` (µ$), for `agentctl spend`. */
  spendReports(day: string, month: string) {
    const p = `${this.prefix}:spend:{spend}`;
    return { dayReport: `${p}:report:${day}`, monthReport: `${p}:report:${month}` };
  }

  /** string: set when a writer's batch `batch` of spend settlements is applied (settleSpend-1.lua applies each once). */
  spendMark(writer: string, batch: number): string {
    return `${this.prefix}:spend:{spend}:batch:${writer}:${batch}`;
  }

  /** string: tokens a tenant used on one UTC day (own hash tag per tenant). */
  tenantTokens(tenant: string, day: string): string {
    return `${this.prefix}:tenant-tokens:{${tenant}}:${day}`;
  }

  /**
   * Flow control's keys (src/flow): every tenant's line, the held slots, the counters, the
   * weights and limits, all under one hash tag `{flow}`, so admission and release are each one
   * script in one Cluster slot (a limit is one counter, checked and taken in the same script).
   */
  flow(): FlowKeys {
    const base = `${this.prefix}:{flow}`;
    return {
      waiting: `${base}:waiting`,
      held: `${base}:held`,
      pending: `${base}:pending`,
      counts: `${base}:counts`,
      turns: `${base}:turns`,
      passes: `${base}:passes`,
      settings: `${base}:settings`,
      admitted: `${base}:admitted`,
      audit: `${base}:audit`,
      repairLease: `${base}:repair-lease`,
      linePrefix: `${base}:line:`,
    };
  }

  /**
   * zset: one tenant's line (run id -> priority and arrival), src/flow; `flow().linePrefix` + tenant, built the same in
   * Lua.
   */
  flowLine(tenant: string): string {
    return `${this.flow().linePrefix}${tenant}`;
  }

  /**
   * A model rate limit's token bucket and its usage series (src/flow/rateLimits.ts): one hash tag per
   * bucket (`{rate:<provider>/<model>[/<tenant>]}`), so a reservation is one script on one node.
   */
  rateBucket(bucket: string): { bucket: string; series: string } {
    const base = `${this.prefix}:{rate:${bucket}}`;
    return { bucket: `${base}:bucket`, series: `${base}:series` };
  }

  /** The BullMQ lock key of a job, used to fence commits (BullMQ internal layout). */
  jobLock(shard: number, jobId: string): string {
    return `${this.bullPrefix}:${queueNameOf(shard)}:${jobId}:lock`;
  }

  /** A queue's marker zset, by queue name: a blocked worker's BZPOPMIN wakes on it (BullMQ >= 5 internal layout). */
  queueMarker(queueName: string): string {
    return `${this.bullPrefix}:${queueName}:marker`;
  }

  /** The BullMQ hash of a job (BullMQ internal layout). */
  jobHash(shard: number, jobId: string): string {
    return `${this.bullPrefix}:${queueNameOf(shard)}:${jobId}`;
  }

  /** A BullMQ finished-jobs zset of a shard's queue (BullMQ internal layout). */
  finishedSet(shard: number, state: 'failed' | 'completed'): string {
    return `${this.bullPrefix}:${queueNameOf(shard)}:${state}`;
  }

  /**
   * A shard queue's key prefix (`<bullPrefix>:steps-{N}:`): a job's hash is `<prefix><jobId>`, its lock
   * `<prefix><jobId>:lock` (BullMQ internal layout; scripts that walk the active list build lock keys from it).
   */
  queueKeyPrefix(shard: number): string {
    return `${this.bullPrefix}:${queueNameOf(shard)}:`;
  }

  /**
   * The BullMQ queue keys a dead owner's jobs move through (BullMQ internal layout, as its stall check uses them), and
   * the owner watch's last scan of the queue's active locks (ours, beside them in the queue's hash slot).
   */
  queueStateKeys(shard: number): {
    active: string;
    wait: string;
    stalled: string;
    meta: string;
    marker: string;
    events: string;
    ownersScan: string;
  } {
    const q = this.queueKeyPrefix(shard);
    return {
      active: `${q}active`,
      wait: `${q}wait`,
      stalled: `${q}stalled`,
      meta: `${q}meta`,
      marker: `${q}marker`,
      events: `${q}events`,
      ownersScan: `${q}agent-owners`,
    };
  }

  allShards(): number[] {
    return Array.from({ length: this.shards }, (_, i) => i);
  }
}

/** The search index term of a run's subject key (KeySpace.searchIndex); a search field's name never starts with `~`. */
export const SEARCH_SUBJECT = '~subject';
/** The tenant of the search index every tenant's runs are also in (a tenant name never is `*`). */
export const SEARCH_ANY_TENANT = '*';

/** A run id as runIdFor makes it: `r_` + 24 lowercase hex digits. */
export const RUN_ID_FORMAT = /^r_[0-9a-f]{24}$/;
/** An action id as the ledger makes it (actionIdentity, planCompensation): `a_` + 32 lowercase hex digits. */
export const ACTION_ID_FORMAT = /^a_[0-9a-f]{32}$/;

/**
 * Whether `id` has a run id's format. Every id that comes from outside (route
 * parameter, CLI argument) is checked before it names a key: a suffix such as
 * `:journal` or a `}` would otherwise address another key of the run.
 */
export function isRunId(id: unknown): id is string {
  return typeof id === 'string' && RUN_ID_FORMAT.test(id);
}

/** Whether `id` has an action id's format (see isRunId). */
export function isActionId(id: unknown): id is string {
  return typeof id === 'string' && ACTION_ID_FORMAT.test(id);
}

/**
 * The home shard of a subject: the shard of its event-less run (runIdFor). Every run of the
 * subject is placed there (runIdForEvent), with the subject's latest-run record.
 */
export function subjectShard(tenant: string, agent: string, subjectKey: string, shards: number): number {
  return shardOf(runIdFor(tenant, agent, subjectKey), shards);
}

/**
 * The run of one intake event on a subject: the same tenant, agent, subject key and event key
 * is the same run (one intake per event). Derived from those four and a counter, the first
 * counter value whose id falls on the subject's home shard: deterministic, so a redelivered
 * event names the same run, and on the subject's shard, so createRun links it atomically.
 * About `shards` digests per call.
 */
export function runIdForEvent(
  tenant: string,
  agent: string,
  subjectKey: string,
  eventKey: string,
  shards: number,
): string {
  const home = subjectShard(tenant, agent, subjectKey, shards);
  for (let n = 0; n < shards * 64; n++) {
    const digest = sha256Hex(`${tenant}\u0000${agent}\u0000${subjectKey}\u0000event\u0000${eventKey}\u0000${n}`);
    const id = `r_${digest.slice(0, 24)}`;
    if (shardOf(id, shards) === home) return id;
  }
  // (1 - 1/S)^(64 S) < e^-64: not reached in practice; an error rather than a run off its subject's shard.
  throw new RangeError('no run id on the subject shard');
}

/** Run id derived from the business identity of the intake: the same tenant, agent and intake key is the same run. */
export function runIdFor(tenant: string, agent: string, intakeKey: string): string {
  const digest = sha256Hex(`${tenant}\u0000${agent}\u0000${intakeKey}`);
  return `r_${digest.slice(0, 24)}`;
}
