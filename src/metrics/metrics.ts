/**
 * Every metric of the fleet, on a registry passed in (never the global one).
 * Labels are bounded: tool, tenant, kind, state, status; never run ids or customer data.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { endsRun } from '../core/status.js';

export class Metrics {
  readonly stepsStarted: Counter;
  readonly stepsCommitted: Counter;
  readonly stepDuration: Histogram;
  readonly modelCalls: Counter;
  readonly modelAttempts: Counter;
  readonly modelTokens: Counter;
  readonly spend: Counter<'tenant' | 'agent' | 'provider' | 'model'>;
  readonly spendLimits: Gauge<'scope'>;
  readonly spendFlushFailures: Counter;
  readonly budgetStops: Counter;
  readonly effects: Counter;
  readonly serviceRejections: Counter<'tool' | 'status'>;
  readonly storeRefusals: Counter<'reason' | 'where'>;
  readonly dedupeHits: Counter;
  readonly duplicateWrites: Counter;
  readonly lateReceipts: Counter<'tool' | 'outcome'>;
  readonly replaysCancelled: Counter<'tool'>;
  readonly loopStops: Counter;
  readonly sigtermHandoffs: Counter;
  readonly modelWaits: Counter;
  readonly followUpWaits: Counter;
  readonly stallRecoveries: Counter;
  readonly deadOwnerRequeues: Counter;
  readonly stepJobsRecreated: Counter;
  readonly ownerWatchErrors: Counter;
  readonly fetchLoopRestarts: Counter;
  readonly fenceRejections: Counter;
  readonly redisConfigOk: Gauge;
  readonly scrapeErrors: Counter;
  readonly runsFinished: Counter;
  readonly versionHandbacks: Counter;
  readonly versionDecisions: Counter;
  readonly textDeltaBatches: Counter;
  readonly runRetries: Counter;
  readonly approvalsVoided: Counter;
  readonly runsSuperseded: Counter;
  readonly cancelsHonoured: Counter;
  readonly flowAdmitted: Counter;
  readonly runsRefused: Counter<'reason' | 'tenant'>;
  readonly flowRepairs: Counter;
  readonly rateLimitWaits: Counter;
  readonly modelRateLimited: Counter;
  readonly scheduleTicks: Counter;
  readonly waits: Counter;
  readonly childRuns: Counter;
  readonly parallelToolCalls: Histogram;
  readonly replicationWaits: Histogram;
  readonly sseViewers: Gauge;
  readonly sseViewersRefused: Counter;
  readonly archivedRuns: Counter;
  readonly archiveFailures: Counter;
  readonly reconcilerSweeps: Counter;
  readonly sweepActionFailures: Counter<'code' | 'outcome'>;
  readonly compensationsUnsettled: Counter<'driver' | 'state'>;
  readonly compensatedRunsAtWork: Counter<'driver'>;
  readonly compensationsRequeued: Counter;
  readonly humanItemsExpired: Counter;
  readonly stuckRunSweepFailures: Counter<'stage' | 'code'>;
  readonly compactions: Counter<'outcome'>;
  readonly erasures: Counter;
  readonly operatorAuthFailures: Counter<'method' | 'reason'>;

  constructor(
    readonly registry: Registry,
    opts: { defaultMetrics?: boolean } = {},
  ) {
    const r = [registry];
    if (opts.defaultMetrics) collectDefaultMetrics({ register: registry });
    this.stepsStarted = new Counter({ name: 'agent_steps_started_total', help: 'Step jobs started', registers: r });
    this.archivedRuns = new Counter({
      name: 'agent_archived_runs_total',
      help: 'Ended runs whose archive row was committed (src/archive/archiver.ts)',
      registers: r,
    });
    this.reconcilerSweeps = new Counter({
      name: 'agent_reconciler_sweeps_total',
      help: "The reconciler's sweeps by outcome (done; failed: the sweep threw; lock_failed: the election lock could not be asked for, a store error, so no reconciler swept this tick)",
      labelNames: ['outcome'],
      registers: r,
    });
    this.compensationsUnsettled = new Counter({
      name: 'agent_compensations_unsettled_total',
      help:
        "Drives of an operator's compensation that ended with it not sent and not with a person (log code " +
        'compensation_unsettled), by driver (operator: the POST, sweep: the reconciler) and the state it was left ' +
        'in: the customer has not had the correcting message; the sweep sends it again',
      labelNames: ['driver', 'state'],
      registers: r,
    });
    this.compensatedRunsAtWork = new Counter({
      name: 'agent_compensated_runs_at_work_total',
      help:
        "An operator's compensation confirmed while its run was at work (retried or resumed while the compensation " +
        'was pending; log code compensated_run_at_work), by driver (operator, sweep): the run was not ended, it ' +
        'goes on as ordered, and the original left the human queue',
      labelNames: ['driver'],
      registers: r,
    });
    this.humanItemsExpired = new Counter({
      name: 'agent_human_items_expired_total',
      help:
        'Human-queue items dropped because their ledger record was gone (log code human_item_expired): an action a ' +
        'person was to settle, its outcome never recorded. A run held for a person keeps its records ' +
        '(includes/expireRun.lua), so any count is a record lost some other way (an eviction, a key deleted by hand)',
      registers: r,
    });
    this.compensationsRequeued = new Counter({
      name: 'agent_compensations_requeued_total',
      help:
        'Originals in compensation_required an earlier release left out of the human queue with their compensation ' +
        'unfinished, put back by the reconciler (log code compensation_requeued) so that its sweep finishes them',
      registers: r,
    });
    this.sweepActionFailures = new Counter({
      name: 'agent_sweep_action_failures_total',
      help:
        "Open actions (and approvals) the reconciler's sweep could not settle (log codes sweep_action_failed, " +
        'approval_expiry_failed), by error code and ' +
        "outcome: needs_human (invalid_spec: the run's spec no longer parses, handed to a person), left_open (the " +
        'settling threw; the next sweep takes the action again)',
      labelNames: ['code', 'outcome'],
      registers: r,
    });
    this.stuckRunSweepFailures = new Counter({
      name: 'agent_stuck_run_sweep_failures_total',
      help:
        'What the stuck-run sweep could not check, by stage and error code: shard (the sweep of a shard stopped, log ' +
        'code stuck_runs_sweep_failed; the reconciler counts its sweep failed) or undecodable_run (a run record that ' +
        'does not decode, skipped, log code stuck_run_skipped)',
      labelNames: ['stage', 'code'],
      registers: r,
    });
    this.archiveFailures = new Counter({
      name: 'agent_archive_failures_total',
      help: 'Archive attempts of a run that failed (PostgreSQL or Redis error): the run stays queued and is taken again',
      labelNames: ['stage'],
      registers: r,
    });
    this.compactions = new Counter({
      name: 'agent_compactions_total',
      help:
        'Ended runs taken off the compaction queue by the reconciler (src/runs/compactor.ts), by outcome: packed, ' +
        'nothing (nothing left to pack), not_ended (at work again, or gone), changed (changed while read: taken again), ' +
        'failed (an error: taken again after COMPACT_LEASE_MS)',
      labelNames: ['outcome'],
      registers: r,
    });
    this.erasures = new Counter({
      name: 'agent_erasures_total',
      help: 'Erasures of a customer (POST /v1/erasures) by outcome',
      labelNames: ['outcome'],
      registers: r,
    });
    this.operatorAuthFailures = new Counter({
      name: 'agent_operator_auth_failures_total',
      help:
        'Operator bearers refused (401), by method (oidc) and reason. The identity provider or its keys unavailable ' +
        '(log code oidc_unavailable): idp_unreachable, jwks_invalid, no_matching_key; the token refused (log code ' +
        'oidc_token_refused): bad_signature, expired, wrong_issuer, wrong_audience, claim_invalid, malformed, no_role',
      labelNames: ['method', 'reason'],
      registers: r,
    });
    this.stepsCommitted = new Counter({
      name: 'agent_steps_committed_total',
      help: 'Steps committed (journal + budget + cursor + next job)',
      registers: r,
    });
    this.stepDuration = new Histogram({
      name: 'agent_step_duration_seconds',
      help: 'Step processing time, start to commit',
      registers: r,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    this.modelCalls = new Counter({
      name: 'agent_model_calls_total',
      help: 'Model calls (one per step decision)',
      labelNames: ['tenant', 'provider'],
      registers: r,
    });
    this.modelAttempts = new Counter({
      name: 'agent_model_attempts_total',
      help: 'Model call attempts, retries included',
      labelNames: ['tenant', 'provider', 'outcome'],
      registers: r,
    });
    this.modelTokens = new Counter({
      name: 'agent_model_tokens_total',
      help: 'Tokens charged to runs',
      labelNames: ['tenant', 'type'],
      registers: r,
    });
    this.spend = new Counter({
      name: 'agent_spend_total',
      help: 'Money model attempts cost, in µ$ (1e-6 USD; src/core/prices.ts), failed attempts included',
      labelNames: ['tenant', 'agent', 'provider', 'model'],
      registers: r,
    });
    this.spendLimits = new Gauge({
      name: 'agent_spend_limit_micros',
      help: 'Money limits in force, in µ$ (0 = none): scope tenant_day, tenant_month, agent_day, fleet_month',
      labelNames: ['scope'],
      registers: r,
    });
    this.spendFlushFailures = new Counter({
      name: 'agent_spend_flush_failures_total',
      help: 'Batches of spend settlements a worker could not send to Redis (kept and sent with the next)',
      registers: r,
    });
    this.budgetStops = new Counter({
      name: 'agent_budget_stops_total',
      help: 'Runs stopped by a budget',
      labelNames: ['kind'],
      registers: r,
    });
    this.effects = new Counter({
      name: 'agent_effects_total',
      help: 'Ledger transitions by tool and target state',
      labelNames: ['tool', 'state'],
      registers: r,
    });
    this.serviceRejections = new Counter({
      name: 'agent_service_rejections_total',
      help:
        'Write requests a service refused outright (4xx, no effect; log code service_rejected), by tool and HTTP ' +
        'status: the action is settled and the model told `rejected` (a same-key replay of a reconciliation refused so ' +
        'goes to a person). 401/403: the service refuses our credentials',
      labelNames: ['tool', 'status'],
      registers: r,
    });
    this.storeRefusals = new Counter({
      name: 'agent_store_refusals_total',
      help:
        'Requests and steps the store could not take, by reason (unavailable: a failover, a lost connection, replicas ' +
        'behind; full: Redis at maxmemory refused a write, OOM) and where (api: answered 503 store_unavailable / ' +
        'store_full with Retry-After; worker: a step failed and is retried). full fires AgentStoreFull',
      labelNames: ['reason', 'where'],
      registers: r,
    });
    this.lateReceipts = new Counter({
      name: 'agent_late_receipts_total',
      help:
        "A service's confirmation that came back after the action had left `dispatched`/`outcome_unknown`, by tool " +
        'and outcome: recorded (it settled an action with a person, log code late_receipt_recorded), unrecorded ' +
        '(the ledger holds it in another state, log code late_receipt_unrecorded: read it against the service)',
      labelNames: ['tool', 'outcome'],
      registers: r,
    });
    this.replaysCancelled = new Counter({
      name: 'agent_replays_cancelled_total',
      help:
        "Same-key replays not sent because the action's run was cancelled while its outcome was unknown (log code " +
        'replay_cancelled), by tool: the action, driven for the model, is settled by a lookup or goes to a person',
      labelNames: ['tool'],
      registers: r,
    });
    this.dedupeHits = new Counter({
      name: 'agent_ledger_dedupe_hits_total',
      help: 'Write requests answered from the ledger instead of re-sent',
      labelNames: ['tool'],
      registers: r,
    });
    this.duplicateWrites = new Counter({
      name: 'agent_duplicate_writes_total',
      help: 'Duplicate business writes detected',
      labelNames: ['tool'],
      registers: r,
    });
    this.loopStops = new Counter({
      name: 'agent_loop_stops_total',
      help: 'Runs stopped because the same write was requested again and again',
      registers: r,
    });
    this.modelWaits = new Counter({
      name: 'agent_model_waits_total',
      help: 'Step jobs delayed to wait out a provider outage (429/5xx, Retry-After honoured)',
      labelNames: ['provider'],
      registers: r,
    });
    this.followUpWaits = new Counter({
      name: 'agent_follow_up_waits_total',
      help: 'First steps of follow-up runs delayed because the previous run of their subject was still queued or running',
      registers: r,
    });
    this.sigtermHandoffs = new Counter({
      name: 'agent_sigterm_handoffs_total',
      help: 'Jobs handed back to the queue on SIGTERM',
      registers: r,
    });
    this.stallRecoveries = new Counter({
      name: 'agent_stall_recoveries_total',
      help: 'Step jobs redelivered after a stall (worker died or froze)',
      registers: r,
    });
    this.stepJobsRecreated = new Counter({
      name: 'agent_step_jobs_recreated_total',
      help: 'Missing step jobs of running runs re-created by the stuck-run sweep (the step replays its journal); past 3 times for one run, the run goes to needs_human (job_missing)',
      registers: r,
    });
    this.deadOwnerRequeues = new Counter({
      name: 'agent_dead_owner_requeues_total',
      help: 'Step jobs moved back to wait because the Redis connection holding their lock vanished (its process died, or the connection dropped)',
      registers: r,
    });
    this.fetchLoopRestarts = new Counter({
      name: 'agent_fetch_loop_restarts_total',
      help: 'Shards whose BullMQ worker fetched nothing for FETCH_STALL_MS while jobs were ready (its loop stopped, e.g. after a failover): replaced by a new worker',
      registers: r,
    });
    this.ownerWatchErrors = new Counter({
      name: 'agent_owner_watch_errors_total',
      help: 'Owner-watch ticks that failed (Redis unreachable); lock expiry still recovers',
      registers: r,
    });
    this.fenceRejections = new Counter({
      name: 'agent_fence_rejections_total',
      help: 'Commits refused by the fence (stale or duplicate step jobs)',
      labelNames: ['code'],
      registers: r,
    });
    this.redisConfigOk = new Gauge({
      name: 'agent_redis_config_ok',
      help: '1 when the Redis setting is safe for queues',
      labelNames: ['check'],
      registers: r,
    });
    this.runsFinished = new Counter({
      name: 'agent_runs_finished_total',
      help: 'Runs that ended (or were parked for a person), by status and reason code (the reason up to its first colon)',
      labelNames: ['status', 'reason'],
      registers: r,
    });
    this.versionHandbacks = new Counter({
      name: 'agent_version_handbacks_total',
      help: 'Step jobs handed back because another live worker serves the version their run is pinned to',
      labelNames: ['agent'],
      registers: r,
    });
    this.versionDecisions = new Counter({
      name: 'agent_version_decisions_total',
      help: 'Operator decisions on runs parked for a version change (continue under a served version, cancel)',
      labelNames: ['decision'],
      registers: r,
    });
    this.textDeltaBatches = new Counter({
      name: 'agent_text_delta_batches_total',
      help: "Batches of streamed model text: written to the run's events, preceded by step_restarted, or stopped (fence lost, write failed)",
      labelNames: ['outcome'],
      registers: r,
    });
    this.runRetries = new Counter({
      name: 'agent_run_retries_total',
      help: 'Operator retries of stopped runs, by the status and reason code retried from and the outcome (retried, or the refusal code)',
      labelNames: ['from', 'reason', 'outcome'],
      registers: r,
    });
    this.approvalsVoided = new Counter({
      name: 'agent_approvals_voided_total',
      help: "A person's approval decision made void because its run will not run it (run_finished, superseded, parent_moved_on, invalid_spec)",
      labelNames: ['why'],
      registers: r,
    });
    this.runsSuperseded = new Counter({
      name: 'agent_runs_superseded_total',
      help: 'A way back to work (retry, resume, continue) refused: a later run of the subject superseded the run',
      labelNames: ['path'],
      registers: r,
    });
    this.cancelsHonoured = new Counter({
      name: 'agent_cancels_before_model_total',
      help: 'A recorded cancel honoured by a step before a model attempt or a wait (no model call after it)',
      labelNames: ['at'],
      registers: r,
    });
    this.flowRepairs = new Counter({
      name: 'agent_flow_repairs_total',
      help: "Flow control state repaired from the runs' own (src/flow/repair.ts), by repair: job_released (an admitted run's job still delayed), requeued (a run waiting for admission in no line), line_entry_removed (a run in line that ended), count_recomputed (a slot counter that disagreed with the slots held)",
      labelNames: ['repair'],
      registers: r,
    });
    this.flowAdmitted = new Counter({
      name: 'agent_flow_admitted_total',
      help: "Runs admitted from their tenant's line (flow control)",
      labelNames: ['tenant'],
      registers: r,
    });
    this.runsRefused = new Counter({
      name: 'agent_runs_refused_total',
      help:
        "New runs refused at intake, nothing written, by reason: tenant_line_full (the tenant's line held " +
        'FLOW_TENANT_MAX_WAITING runs; the API answered 429 with Retry-After)',
      labelNames: ['reason', 'tenant'],
      registers: r,
    });
    this.rateLimitWaits = new Counter({
      name: 'agent_rate_limit_waits_total',
      help: "Step jobs delayed because a model rate limit's bucket was empty (or blocked by a 429's Retry-After)",
      labelNames: ['bucket'],
      registers: r,
    });
    this.modelRateLimited = new Counter({
      name: 'agent_model_rate_limited_total',
      help: 'Model attempts answered 429 by the provider',
      labelNames: ['provider'],
      registers: r,
    });
    this.scheduleTicks = new Counter({
      name: 'agent_schedule_ticks_total',
      help: 'Schedule ticks, by outcome (started a run, duplicate of a started one, skipped: paused or removed, invalid, revoked: the credential that made it is no longer configured, the schedule paused; retried: the tick threw and is tried again; failed: it threw on every attempt, no run started)',
      labelNames: ['outcome'],
      registers: r,
    });
    this.waits = new Counter({
      name: 'agent_waits_total',
      help:
        'Durable waits of runs (sleep, event, child) by how they ended: parked, delivered, woke, timed_out, refused; ' +
        "job_recreated: the stuck-run sweep re-created a parked wait's missing wake job; key_released: the key of a " +
        'wait whose run ended freed; delivery_<outcome>: POST /v1/events and webhook deliveries (resumed, kept, seen, ' +
        'duplicate, no_wait, refused_payload_size, refused_kept_count, refused_kept_bytes)',
      labelNames: ['kind', 'outcome'],
      registers: r,
    });
    this.childRuns = new Counter({
      name: 'agent_child_runs_total',
      help:
        'Child runs of agent tools: started (outcome created), refused (outcome the tool error), ended (outcome the ' +
        "child's status, counted when its parent resumes), orphaned (outcome: the parent's status when the child ended), " +
        "wake_recovered (outcome promoted: the stuck-run sweep promoted the parent's wake job a child's end did not), " +
        'repeated (a hand-off asked again, answered from its child: outcome answered, or waiting while it works)',
      labelNames: ['event', 'outcome'],
      registers: r,
    });
    this.parallelToolCalls = new Histogram({
      name: 'agent_parallel_tool_calls',
      help: 'Tool calls a step ran at once (batches of two or more)',
      registers: r,
      buckets: [2, 3, 4, 6, 8, 12, 16],
    });
    this.replicationWaits = new Histogram({
      name: 'agent_replication_wait_seconds',
      help: "Waits for replicas (WAIT/WAITAOF, REDIS_MIN_REPLICAS) before a write is acknowledged: a run's creation (intake) or an action's intent (dispatch); outcome ok or not_replicated",
      labelNames: ['write', 'outcome'],
      registers: r,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    });
    this.sseViewers = new Gauge({
      name: 'agent_sse_viewers',
      help: 'Live event streams (SSE) this API process serves, by kind of principal (tenant, producer, operator)',
      labelNames: ['principal'],
      registers: r,
    });
    this.sseViewersRefused = new Counter({
      name: 'agent_sse_viewers_refused_total',
      help: 'Event stream viewers refused with 503, by the limit hit (SSE_MAX_VIEWERS_PER_PRINCIPAL, SSE_OPERATOR_RESERVE, SSE_MAX_VIEWERS) and kind of principal',
      labelNames: ['limit', 'principal'],
      registers: r,
    });
    this.scrapeErrors = new Counter({
      name: 'agent_scrape_collect_errors_total',
      help: 'Scrape-time gauges not refreshed because their Redis read failed',
      labelNames: ['collector'],
      registers: r,
    });
  }
}

/** The bounded code of a run's reason (`attempts_exhausted: transient` -> `attempts_exhausted`); never free text. */
export function reasonCode(reason: string): string {
  const code = reason.split(':', 1)[0]!.trim();
  return /^[a-z][a-z0-9_]{0,39}$/.test(code) ? code : 'other';
}

/**
 * Counts one run end (terminal, or handed to a person): call it once per status change (any other status is ignored).
 */
export function countRunFinished(metrics: Metrics, status: string, reason: string): void {
  if (endsRun(status)) metrics.runsFinished.inc({ status, reason: reasonCode(reason) });
}

export function newMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  return new Metrics(new Registry(), opts);
}
