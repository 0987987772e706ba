/**
 * Stage 1, load: the job's data validated, the run's spec, and on a redelivery the
 * run's state (a stale job is refused here and only makes sure the current step's
 * job exists) and the decision an earlier delivery journalled.
 *
 * A first delivery of a job created by the previous commit trusts the usage its data
 * carries (as of that commit) and reads nothing else: no decision for this step can
 * exist yet (the commit script refuses if one does). Any redelivery reads the state.
 */
import type { Context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { InvalidStepInput } from '../../core/errors.js';
import type { DecisionEntry, ObservationEntry } from '../../core/journal.js';
import {
  fieldOf,
  safeParseStepJobData,
  unreadableSpecField,
  type RunLimits,
  type RunSpec,
  type StepJobData,
} from '../../runs/spec.js';
import { isWaitStatus } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import { lazyChild } from './log.js';
import type { StepJob, StepState } from './state.js';

/** A delivery as the worker hands it over. */
export interface Delivery {
  job: StepJob;
  signal: AbortSignal;
  dispatchSignal: AbortSignal;
  trace: Context | undefined;
  log: Logger;
}

/** Specs with an operator's extended limits, one object per (spec, limits) so caches keyed by the spec keep hitting. */
export type LimitedSpecs = WeakMap<RunSpec, RunSpec>;

/** The step's state, or undefined when the job has nothing to do (unknown run, stale or duplicate job). */
export async function load(env: StepEnv, d: Delivery, limited: LimitedSpecs): Promise<StepState | undefined> {
  const started = process.hrtime.bigint();
  const startedAt = env.now();
  const data = parseJobData(d.job.data);
  const { runId, step } = data;
  const { job } = d;
  const log = lazyChild(d.log, { runId, step, jobId: job.id, attempt: job.attemptsStarted });
  env.metrics.stepsStarted.inc();
  const spec = await currentSpec(env, runId, log);
  if (!spec) return undefined;
  const redelivered = data.resume === true || data.wake === true || job.attemptsStarted > 1 || job.attemptsMade > 0;
  const known = redelivered
    ? await readDelivered(env, job, runId, step, log)
    : { used: data.used, cancelRequested: false };
  if (!known) return undefined;
  const startedEvent = JSON.stringify({
    step,
    jobId: job.id,
    attempt: job.attemptsStarted,
    startedAt,
    worker: env.workerName,
  });
  return {
    job,
    data,
    runId,
    step,
    spec: withLimits(limited, spec, data.limits),
    redelivered,
    signal: d.signal,
    dispatchSignal: d.dispatchSignal,
    trace: d.trace,
    log,
    started,
    startedEvent,
    used: known.used,
    cancelRequested: known.cancelRequested,
    startedEmitted: false,
    carriesDecision: false,
    costUncharged: 0,
    // What a redelivery found, undefined on a first delivery: every state has one shape, and no spreads of mostly
    // empty objects (they allocated more than the state itself).
    decision: known.decision,
    decisionDigest: known.decisionDigest,
    observed: known.observed?.length ? known.observed : undefined,
    waking: known.waking,
  };
}

function parseJobData(raw: unknown): StepJobData {
  const parsed = safeParseStepJobData(raw);
  if (!parsed.success) throw new InvalidStepInput('invalid_job_data', fieldOf(parsed.error), { cause: parsed.error });
  return parsed.data;
}

/**
 * The run's spec. A run an operator continued under another version is re-pinned in Redis
 * while the cache may hold its old pin: a spec this worker would not run is read again once
 * before any verdict on it.
 */
async function currentSpec(env: StepEnv, runId: string, log: Logger): Promise<RunSpec | undefined> {
  const cached = await readSpec(env, runId);
  if (!cached) {
    log.warn({ code: 'run_missing' }, 'step for an unknown run: dropped');
    return undefined;
  }
  if (env.agents.agentFor(cached)) return cached;
  env.store.forgetSpec(runId);
  return (await readSpec(env, runId)) ?? cached;
}

function readSpec(env: StepEnv, runId: string): Promise<RunSpec | undefined> {
  return env.store.spec(runId).catch((err: unknown) => {
    const field = unreadableSpecField(err);
    if (field !== undefined) throw new InvalidStepInput('invalid_spec', field, { cause: err });
    throw err;
  });
}

/** A redelivery's usage and journalled decision, or undefined for a stale job (the run is elsewhere). */
async function readDelivered(
  env: StepEnv,
  job: StepJob,
  runId: string,
  step: number,
  log: Logger,
): Promise<
  | (Pick<StepState, 'used' | 'decision' | 'decisionDigest' | 'observed' | 'waking'> & { cancelRequested: boolean })
  | undefined
> {
  const state = await env.store.readState(runId);
  if (!state) return undefined;
  const current = state.cursor === step && state.jobId === job.id;
  // The wake job of a parked wait: the wait is settled before the step (src/worker/step/wake.ts).
  if (current && isWaitStatus(state.status) && state.wait)
    return { used: state.used, cancelRequested: state.cancelRequested, waking: state.wait };
  if (!current || (state.status !== 'running' && state.status !== 'queued')) {
    log.info({ code: 'stale_step', cursor: state.cursor, status: state.status }, 'stale step job');
    env.metrics.fenceRejections.inc({ code: 'stale_step' });
    await env.store.ensureCurrentStepJob(runId);
    return undefined;
  }
  const known = { used: state.used, cancelRequested: state.cancelRequested };
  if (state.decidedStep !== step) return known;
  const read = await env.store.journalEntry(runId, state.decisionIndex);
  const entry = read?.entry;
  const decision: DecisionEntry | undefined = entry?.kind === 'decision' && entry.step === step ? entry : undefined;
  if (!decision) return known;
  const observed = await observedAfter(env, runId, step, state.decisionIndex);
  return { ...known, decision, decisionDigest: read!.digest, observed };
}

/** The step's observations journalled after its decision (calls an earlier delivery finished). */
async function observedAfter(env: StepEnv, runId: string, step: number, decisionIndex: number) {
  const transcript = await env.store.transcript(runId);
  return transcript
    .slice(decisionIndex + 1)
    .filter((e): e is ObservationEntry => e.kind === 'observation' && e.step === step);
}

/** The spec with the limits an operator's retry set (carried by the job); the spec itself when there are none. */
function withLimits(limited: LimitedSpecs, spec: RunSpec, limits: RunLimits | undefined): RunSpec {
  if (!limits) return spec;
  const hit = limited.get(spec);
  if (hit && sameLimits(hit.limits, limits)) return hit;
  const derived = { ...spec, limits };
  limited.set(spec, derived);
  return derived;
}

function sameLimits(a: RunLimits, b: RunLimits): boolean {
  return (
    a.maxSteps === b.maxSteps &&
    a.maxTokens === b.maxTokens &&
    a.maxWallMs === b.maxWallMs &&
    a.deadlineAt === b.deadlineAt &&
    a.maxCost === b.maxCost
  );
}
