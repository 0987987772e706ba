/**
 * One agent step = one BullMQ job (id `<runId>.s<step>`), run as four stages over
 * one state object (src/worker/step/state.ts):
 *
 *   load   (load.ts)    job data, spec, and on a redelivery the run's state (stale jobs end here)
 *   decide (decide.ts)  the journalled decision, or budget pre-flight -> model call (retried in code)
 *                       -> journalled at once when a write follows or on a redelivery
 *   act    (act.ts)     the tool calls; writes through the effect ledger
 *   commit (commit.ts)  journal entries + budget + cursor + next step's job + this job's
 *                       completion, one script, fenced by the job's lock token and the run's cursor
 *
 * A stage that ends the step early returns the commit that stops the run, or hands the job
 * back (DelayedError). If the process dies anywhere before the commit, the job is redelivered
 * and the step starts again: a journalled decision is reused, confirmed effects are answered
 * from the ledger, dispatched-but-unconfirmed ones are reconciled. If it dies after the commit,
 * the redelivered job is stale: the fence refuses it and it only makes sure the run's current
 * step job exists.
 */
import { DelayedError } from 'bullmq';
import { codedDetails, errorCode, FenceError, isAgentError } from '../../core/errors.js';
import { NotReplicatedError } from '../../store/replicated.js';
import { storeFull } from '../../store/unavailable.js';
import { act } from './act.js';
import { parentEnded } from './cancel.js';
import { commit } from './commit.js';
import { decide } from './decide.js';
import type { StepEnv } from './env.js';
import { load, type Delivery, type LimitedSpecs } from './load.js';
import { Prompts } from './prompt.js';
import { stopPlan, type CommitPlan, type StepState } from './state.js';
import { notServed } from './waits.js';
import { wake } from './wake.js';

export class StepPipeline {
  private readonly prompts: Prompts;
  /** Specs with an operator's extended limits, per spec object. */
  private readonly limited: LimitedSpecs = new WeakMap();

  constructor(private readonly env: StepEnv) {
    this.prompts = new Prompts(env.store, env.cfg.COMPLETION_TOKEN_CAP, (spec) => env.followUps.known(spec));
  }

  /** The stages, in order; a stage that returns a plan ends the step with it. */
  async run(delivery: Delivery, fetchNext: () => boolean = () => false): Promise<void> {
    const state = await load(this.env, delivery, this.limited);
    if (!state) return;
    try {
      if (state.waking) await wake(this.env, state, state.waking);
      const plan = await this.plan(state);
      await commit(this.env, state, plan, fetchNext());
      if (plan.advance) {
        this.env.metrics.stepDuration.observe(Number(process.hrtime.bigint() - state.started) / 1e9);
        state.log.debug({ code: 'step_committed', status: plan.status }, 'step committed');
      }
    } catch (err) {
      await this.failed(state, err, fetchNext);
    }
  }

  /**
   * decide, then act (a child whose parent ended stops first). The run's agent at its pinned version and tools hash: a worker that does
   * not serve it hands the step back to one that does, or parks the run (src/worker/versionGate.ts).
   */
  private async plan(state: StepState): Promise<CommitPlan> {
    const orphaned = await parentEnded(this.env, state);
    if (orphaned) return orphaned;
    const agent = this.env.agents.agentFor(state.spec);
    if (!agent) return notServed(this.env, state);
    const stopped = await decide(this.env, this.prompts, state, agent);
    return stopped ?? act(this.env, state, agent, state.decision!);
  }

  /**
   * A stage threw. A hand-back (DelayedError) passes through; replicas behind delay the job; a fence
   * refusal ends the delivery; at SIGTERM the job is handed back; Redis at maxmemory refusing a write delays the
   * job (waitForMemory), never ends the run; on the job's last attempt the run
   * ends `failed` with the error's code (never its text: it may quote customer data); else BullMQ
   * retries the job.
   */
  private async failed(state: StepState, err: unknown, fetchNext: () => boolean): Promise<void> {
    const { log } = state;
    if (err instanceof DelayedError) throw err;
    if (err instanceof NotReplicatedError && !state.signal.aborted) return this.waitForReplicas(state, err);
    if (err instanceof FenceError) return this.fenced(state, err);
    if (state.signal.aborted) throw err;
    if (storeFull(err)) return this.waitForMemory(state, err);
    const lastAttempt = state.job.attemptsMade + 1 >= state.job.maxAttempts;
    log.error({ code: isAgentError(err) ? err.code : 'step_error', err, lastAttempt }, 'step failed');
    if (!lastAttempt) throw err;
    // If this stop cannot be committed, the job fails and the failed event (or the sweep) ends the run.
    const stop = stopPlan(state.step, { status: 'failed', reason: `step_error: ${errorCode(err)}` });
    await commit(this.env, state, stop, fetchNext()).catch((commitErr: unknown) => {
      log.error({ code: 'stop_commit_failed', err: commitErr }, 'could not commit the failed status');
      throw err;
    });
  }

  /** Nothing was sent (the action is safe_retry): the job waits for the replicas without spending an attempt. */
  private async waitForReplicas(state: StepState, err: NotReplicatedError): Promise<never> {
    state.log.warn({ code: err.code, ...codedDetails(err.details) }, 'replicas behind: step delayed');
    await state.job.delay(this.env.now() + err.retryAfterMs);
    throw new DelayedError();
  }

  /**
   * Redis at maxmemory refused a write (OOM): nothing of the refused command was written, and the step can only
   * succeed once memory is freed or raised. Counted (agent_store_refusals_total{reason="full",where="worker"}) and
   * logged `store_full`; the job waits STORE_RETRY_AFTER_S without spending an attempt, so a full store never ends a
   * run. When the delay cannot be written either (the store still full), the error goes to BullMQ as a connection
   * error does: the job's lock lapses and the stalled-job check hands it back once Redis takes writes again.
   */
  private async waitForMemory(state: StepState, err: unknown): Promise<never> {
    this.env.metrics.storeRefusals.inc({ reason: 'full', where: 'worker' });
    state.log.warn({ code: 'store_full', err }, 'store full (Redis maxmemory): step delayed');
    try {
      await state.job.delay(this.env.now() + (this.env.cfg.STORE_RETRY_AFTER_S ?? 2) * 1000);
    } catch {
      throw err;
    }
    throw new DelayedError();
  }

  /**
   * Another owner moved the run on: counted, and the run's current job made sure of. A decision
   * journalled concurrently throws, so the redelivery reuses it; so does a decision the store does
   * not hold (a failover took it back after this delivery journalled it): the redelivery reads the
   * step's decision where the run is now, or decides again, and nothing of this one is written.
   */
  private async fenced(state: StepState, err: FenceError): Promise<void> {
    this.env.metrics.fenceRejections.inc({ code: err.code });
    state.log.info({ code: err.code }, 'commit refused by the fence');
    if (err.code !== 'lock_lost') await this.env.store.ensureCurrentStepJob(state.runId);
    if (err.code === 'decision_exists' || err.code === 'decision_not_journalled') throw err;
  }
}
