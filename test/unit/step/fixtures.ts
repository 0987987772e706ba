/** A step's world without Redis: an agent with a read and a write tool, a queued-turns model, the memory store. */
import { pino } from 'pino';
import { z } from 'zod';
import { defineAgent, defineReadTool, defineWriteTool, type Agent } from '../../../src/core/agent.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../../../src/core/model.js';
import { CrashPoints } from '../../../src/config/testHooks.js';
import { newMetrics } from '../../../src/metrics/metrics.js';
import type { RunSpec, StepJobData } from '../../../src/runs/spec.js';
import type { EffectResult, EffectRunner } from '../../../src/worker/effects.js';
import type { StepEnv, StepOptions } from '../../../src/worker/step/env.js';
import { StepPipeline } from '../../../src/worker/step/pipeline.js';
import type { Delivery } from '../../../src/worker/step/load.js';
import type { StepState } from '../../../src/worker/step/state.js';
import { type MemoryJob, MemoryStepStore } from './memoryStepStore.js';

export const NOW = 1_700_000_000_000;

export const options: StepOptions = {
  COMPLETION_TOKEN_CAP: 100,
  MODEL_MAX_ATTEMPTS: 2,
  RETRY_BASE_MS: 1,
  RETRY_MAX_MS: 2,
  MODEL_OUTAGE_MAX_MS: 60_000,
  EVENTS_MAX_LEN: 100,
  RUN_RETENTION_MS: 1000,
  APPROVAL_TTL_MS: 1000,
  TENANT_DAILY_TOKENS: 0,
  MODEL_STREAMING: false,
  MODEL_STREAM_FLUSH_MS: 10,
  MODEL_STREAM_FLUSH_CHARS: 10,
  FOLLOW_UP_WAIT_MS: 500,
  EVENT_KEEP_MS: 60_000,
};

export const reads: string[] = [];

export const agent: Agent = defineAgent({
  name: 'echo',
  version: 'echo@1',
  input: z.object({ text: z.string() }),
  instructions: () => 'Echo.',
  tools: [
    defineReadTool({
      name: 'read_note',
      description: 'reads a note',
      args: z.object({ id: z.string() }),
      execute: async ({ id }) => (reads.push(id), { note: `note ${id}` }),
    }),
    defineWriteTool({
      name: 'send_note',
      description: 'sends a note',
      args: z.object({ to: z.string() }),
      service: { enforcesKey: true, reconcile: 'none' },
      dispatch: async () => ({ receipt: 'x', output: {}, replayed: false }),
    }),
  ],
});

/** A model that answers from a queue of turns (or errors), recording every request. */
export class QueuedModel implements ModelProvider {
  readonly name = 'queued';
  readonly needsTranscript = false;
  readonly requests: ModelRequest[] = [];
  constructor(readonly turns: (ModelTurn | Error)[] = []) {}

  async complete(req: ModelRequest): Promise<ModelTurn> {
    this.requests.push(req);
    const next = this.turns.shift();
    if (!next) throw new Error('no turn left');
    if (next instanceof Error) throw next;
    return next;
  }
}

export const usage = { promptTokens: 10, completionTokens: 2 };
export const readTurn = (id = 'n1'): ModelTurn => ({
  toolCalls: [{ id: `c-${id}`, name: 'read_note', args: { id } }],
  usage,
});
export const writeTurn: ModelTurn = { toolCalls: [{ id: 'c-w', name: 'send_note', args: { to: 'a' } }], usage };
export const finalTurn: ModelTurn = { toolCalls: [], final: 'done', usage };

export function specOf(over: Partial<RunSpec> = {}): RunSpec {
  return {
    v: 2,
    runId: 'r_000000000000000000000001',
    tenant: 'acme',
    agent: 'echo',
    key: 'k',
    input: { text: 'hi' },
    model: 'queued',
    agentVersion: agent.version,
    toolsHash: agent.tools.schemaHash,
    limits: { maxSteps: 10, maxTokens: 100_000, maxWallMs: 60_000, deadlineAt: NOW + 60_000 },
    createdAt: NOW,
    ...over,
  };
}

export interface World {
  env: StepEnv;
  store: MemoryStepStore;
  model: QueuedModel;
  effects: (EffectResult | Error)[];
  clock: { now: number };
  crashed: string[];
  pipeline: StepPipeline;
}

/**
 * `crash`: points armed to throw (a death at that instant, seen as a thrown error); `effects`: the ledger's answers.
 */
export interface WorldOptions {
  turns?: (ModelTurn | Error)[];
  crash?: string[];
  effects?: (EffectResult | Error)[];
  /** The ledger's answer for a write call whose arguments the tool refuses: the action the call planned, if any. */
  resumed?: EffectResult;
  /** The ledger's answer for a call whose tool is gone: the settled outcome of the action the call planned, if any. */
  settled?: EffectResult;
}

export function world(opts: WorldOptions = {}): World {
  const store = new MemoryStepStore();
  const model = new QueuedModel(opts.turns ?? []);
  const clock = { now: NOW };
  const crashed: string[] = [];
  const effects = opts.effects ?? [];
  const runner: EffectRunner = {
    run: async () => {
      const next = effects.shift() ?? { kind: 'observed', status: 'ok', output: { sent: true }, actionId: 'a1' };
      if (next instanceof Error) throw next;
      return next;
    },
    resume: async () => opts.resumed,
    settledFor: async () => opts.settled,
  };
  const env: StepEnv = {
    cfg: options,
    store,
    providers: new Map([['queued', model]]),
    effects: runner,
    metrics: newMetrics(),
    agents: {
      agentFor: (spec) => (spec.agent === agent.name && spec.agentVersion === agent.version ? agent : undefined),
      verdict: async (spec) => ({ kind: 'park', reason: `unknown_agent: ${spec.agent}` }),
    },
    tenant: { reserve: async () => undefined, settle: async () => {} },
    followUps: { context: async () => ({ text: '' }), known: () => '' },
    crash: new CrashPoints(opts.crash ?? [], () => {
      crashed.push('killed');
      throw new Error('killed');
    }),
    now: () => clock.now,
    tracer: undefined,
    workerName: 'worker:test',
    admission: undefined,
    rates: undefined,
  };
  return { env, store, model, effects, clock, crashed, pipeline: new StepPipeline(env) };
}

export const log = pino({ level: 'silent' });

export function jobData(spec: RunSpec, step = 1, over: Partial<StepJobData> = {}): StepJobData {
  return { v: 1, runId: spec.runId, step, used: { steps: step - 1, tokens: 0, contextBytes: 0 }, ...over };
}

export function delivery(job: MemoryJob, signal = new AbortController().signal): Delivery {
  return { job, signal, dispatchSignal: signal, trace: undefined, log };
}

/** A state as the load stage makes it, for the stages after it. */
export function stateOf(spec: RunSpec, job: MemoryJob, over: Partial<StepState> = {}): StepState {
  return {
    job,
    data: job.data as StepJobData,
    runId: spec.runId,
    step: (job.data as StepJobData).step,
    spec,
    redelivered: false,
    signal: new AbortController().signal,
    dispatchSignal: new AbortController().signal,
    trace: undefined,
    log,
    started: process.hrtime.bigint(),
    startedEvent: '{"step":1}',
    used: { steps: 0, tokens: 0, contextBytes: 0 },
    cancelRequested: false,
    startedEmitted: false,
    carriesDecision: false,
    costUncharged: 0,
    ...over,
  };
}
