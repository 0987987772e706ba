/**
 * The crash-test kit: a team's agent through every crash point the engine has,
 * in real worker processes SIGKILLed there, against real Redis, with the
 * team's own service counting the effects. The check the fleet's own chaos
 * campaign makes, for any agent's write tools.
 *
 * For each step of the script that calls a write tool and each crash point, one run on its own key
 * prefix: a spawned worker (CRASH_POINTS=<point>@<step>) kills itself at that instant, another
 * worker finishes the run, and once no action of the run is in flight, the service's count for the
 * action's idempotency key is read. A case passes when the effect happened exactly once and the run
 * completed, or when the run is with a person (needs_human) with at most one effect and the
 * ledger's evidence.
 *
 * Every call has a namespace of its own (its runs' tenants, so their run ids and idempotency keys):
 * a service that outlives one call never answers a later one from the effects of an earlier one.
 *
 * @example
 *   const report = await crashTest({ agentsModule: 'agents/index.ts', input, script,
 *     service: { env: { CRM_URL: crm.url }, effects: () => crm.effectsByKey() } });
 *   expect(report.failures).toEqual([]);
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig, type Config } from '../src/config/config.js';
import type { CrashPointName } from '../src/config/testHooks.js';
import { createContext } from '../src/server/buildContext.js';
import { loadAgents } from '../src/server/loadAgents.js';
import { buildSpec } from '../src/producer/intake.js';
import { scriptSchema, type ScriptTurn } from '../src/models/scriptedTurns.js';
import { Ledger } from '../src/ledger/ledger.js';
import { FleetWorker } from '../src/worker/fleetWorker.js';
import { createEffectRunner } from '../src/ledger/runner.js';
import { createLogger } from '../src/metrics/log.js';
import { newMetrics } from '../src/metrics/metrics.js';
import type { AgentCatalog } from '../src/core/agent.js';
import type { EngineContext } from '../src/runs/engineContext.js';
import { startEmbeddedRedis } from './embeddedRedis.js';
import { deletePrefix, uniquePrefix } from './keyPrefix.js';
import { spawnWorker } from './processes.js';
import { until } from './until.js';

/**
 * The crash points of a step that calls a write tool, in the order they come: the decision
 * journalled, the action reserved (before dispatch), dispatched (the request about to leave), the
 * call returned (its outcome not yet recorded), the outcome recorded, before and after the commit.
 */
export const STEP_CRASH_POINTS = [
  'after_decision',
  'after_reservation',
  'after_dispatched',
  'after_call',
  'after_outcome',
  'before_commit',
  'after_commit',
] as const satisfies readonly CrashPointName[];

/**
 * The crash point of the answer: the worker dies after the first streamed piece of the run's final answer is
 * written (MODEL_STREAMING on for that case). Every write the run made before must stay exactly once when the
 * answer step is redone.
 */
export const ANSWER_CRASH_POINTS = ['mid_stream'] as const satisfies readonly CrashPointName[];

/** Every point the kit runs by default. */
export const CRASH_TEST_POINTS = [...STEP_CRASH_POINTS, ...ANSWER_CRASH_POINTS] as const;

export interface CrashTestService {
  /** The environment the agents module reads the service's address from (e.g. `{ CRM_URL: crm.url }`). */
  env?: Record<string, string>;
  /** The effects the service holds, counted per idempotency key (or per action id) it was sent. */
  effects(): Record<string, number> | Promise<Record<string, number>>;
  /**
   * True when the service holds no request open (every request it received is answered and its effect, if any,
   * made). The effects are read only then: a request still at the service (a slow commit, a replay the run's
   * doubt sent) may yet make one. Default: the kit waits only for the ledger (no action in flight).
   */
  idle?(): boolean | Promise<boolean>;
}

export interface CrashTestOptions {
  /** The agents module (AGENTS_MODULE), a path from the working directory. */
  agentsModule: string;
  /** The agent to run (default: the module's only agent). */
  agent?: string;
  /** The run's input (each case runs it under its own tenant). */
  input: unknown;
  /** The scripted model's turns (the script format of POST /v1/runs). */
  script: unknown;
  service: CrashTestService;
  /** Default: CRASH_TEST_POINTS (every write step at each step point, and the answer mid-stream). */
  points?: readonly CrashPointName[];
  /** Default: REDIS_URL, else an embedded redis-server started for the test and stopped after. */
  redisUrl?: string;
  /**
   * Cases run side by side, each with its own worker process (default 3). A case's time is mostly its victim's
   * start-up, which is CPU; the crash, the takeover and the count after it mostly wait on Redis and the service, so
   * on 2 cores a third case starting its victim fills those waits.
   */
  parallel?: number;
  /**
   * Runs a case may take (default 3). A run that never came to its crash point because the service gave no
   * definite answer on the way (the call timed out, was reset, was refused: the action went `outcome_unknown`)
   * tested nothing at that point: the case is run again, under a new run id, up to this many times.
   */
  attempts?: number;
  /**
   * How long, after a run settles, the kit waits for every action of the case to settle (none `dispatched` or
   * `outcome_unknown`) and for the service to be idle before it counts (default 30 s); past it the case is
   * `unsettled`.
   */
  settleTimeoutMs?: number;
}

export type CrashVerdict =
  'exactly_once' | 'with_a_person' | 'duplicate' | 'lost' | 'failed' | 'not_reached' | 'kept_from_point' | 'unsettled';

/** One write action of one case: what the service counted for it and how the run ended. */
export interface CrashCase {
  tool: string;
  point: CrashPointName;
  /** The step the worker was killed in (for `mid_stream`, the answer's step; the tool's own step may be earlier). */
  step: number;
  runId: string;
  /** The run's status after recovery, and its reason when it has one. */
  status: string;
  reason?: string | undefined;
  /** The action's ledger state, and the evidence of its last transition. */
  actionState?: string | undefined;
  evidence?: unknown;
  /** Effects the service counted for the action's key. */
  effects: number;
  verdict: CrashVerdict;
  /** Runs the case took: more than one when the service kept a run from the crash point (see `attempts`). */
  attempts: number;
}

export interface CrashReport {
  cases: CrashCase[];
  /** Cases where the service counted more than one effect for one action. */
  duplicates: CrashCase[];
  /** Every case that is neither exactly once nor with a person nor kept from its point (duplicates included). */
  failures: CrashCase[];
  /** Cases whose every run the service kept from the crash point (`kept_from_point`): untested there, not failed. */
  unreached: CrashCase[];
  /** This call's namespace: every run's tenant is `ct-<namespace>-<attempt>-<point>-<step>`. */
  namespace: string;
  /** One line per case: `tool point@step: verdict (effects, status)`, and the runs it took when more than one. */
  summary(): string;
}

const SETTLED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];
const PASSING: readonly CrashVerdict[] = ['exactly_once', 'with_a_person', 'kept_from_point'];
/** Ledger states in which a request of the action may still be at the service. */
const IN_FLIGHT = ['dispatched', 'outcome_unknown'];

/** A step to kill the worker in, and the write calls whose effects the case counts. */
interface Target {
  step: number;
  calls: { step: number; tool: string }[];
}

/** A crash test's script: plain turns, so each step's writes are known before the run (see plainScript). */
type Script = ScriptTurn[];

/**
 * The script's turns, refused with a TypeError when one is a branching turn: which writes such a step makes depends on
 * what the run's tools answered, so the crash points of its writes cannot be chosen beforehand.
 */
function plainScript(raw: unknown): Script {
  return scriptSchema.parse(raw).map((entry, i) => {
    if ('branches' in entry)
      throw new TypeError(`crashTest: turn ${i + 1} is a branching turn; give the crash test a script of plain turns`);
    return entry;
  });
}

/** Every write call of the script, in order, with its step. */
function writeCalls(catalog: AgentCatalog, agentName: string, script: Script): Target['calls'] {
  const agent = catalog.get(agentName)!;
  return script.flatMap((turn, i) =>
    turn.toolCalls
      .filter((c) => agent.tools.get(c.name)?.effect === 'write')
      .map((c) => ({ step: i + 1, tool: c.name })),
  );
}

/** The cases of one point: each write step for a step point; the answer step (with every write) for mid_stream. */
function targetsOf(point: CrashPointName, calls: Target['calls'], script: Script): Target[] {
  if (point === 'mid_stream') {
    const answers = script.flatMap((turn, i) => ((turn.final ?? '').length > 0 ? [i + 1] : []));
    return answers.length === 0 ? [] : [{ step: answers.at(-1)!, calls }];
  }
  const steps = [...new Set(calls.map((c) => c.step))];
  return steps.map((step) => ({ step, calls: calls.filter((c) => c.step === step) }));
}

/** The victim's environment for a point: the answer is streamed in small pieces for mid_stream. */
function victimEnv(env: Record<string, string>, point: CrashPointName, step: number): Record<string, string> {
  const streamed: Record<string, string> =
    point === 'mid_stream' ? { MODEL_STREAMING: 'true', MODEL_STREAM_FLUSH_CHARS: '1' } : {};
  return { ...env, ...streamed, CRASH_POINTS: `${point}@${step}` };
}

const runStatus = async (ctx: EngineContext, runId: string): Promise<string> =>
  (await ctx.redis.hget(ctx.keys.run(runId).run, 'status')) ?? '';

/** The run's status once settled, or the status it has at the end of `timeoutMs` (`missing` for none). */
async function settled(ctx: EngineContext, runId: string, timeoutMs: number): Promise<string> {
  const status = await until(`run ${runId} settled`, timeoutMs, async () => {
    const s = await runStatus(ctx, runId);
    return SETTLED.includes(s) && s;
  }).catch(() => undefined);
  return status ?? ((await runStatus(ctx, runId)) || 'missing');
}

type Actions = Awaited<ReturnType<Ledger['listForRun']>>;

/**
 * The run's actions once none is in flight and the service is idle (a request still at the service may yet make an
 * effect: counted before it lands, a case would read 0 where the service ends up holding 1); undefined past the
 * timeout.
 */
async function quietActions(
  ledger: Ledger,
  runId: string,
  service: CrashTestService,
  timeoutMs: number,
): Promise<Actions | undefined> {
  return await until(`the actions of run ${runId} settled and the service idle`, timeoutMs, async () => {
    const actions = await ledger.listForRun(runId);
    if (actions.some((a) => IN_FLIGHT.includes(a.state))) return undefined;
    return (await (service.idle?.() ?? true)) && actions;
  }).catch(() => undefined);
}

/** The service kept the run from the point: an action of the case went without a definite answer. */
function keptByService(actions: Actions, calls: Target['calls']): boolean {
  return actions.some(
    (a) =>
      calls.some((c) => c.step === a.step && c.tool === a.tool) && a.history.some((h) => h.to === 'outcome_unknown'),
  );
}

/** What the run's end and the service's count say, whatever the crash. */
function outcomeOf(status: string, effects: number): CrashVerdict {
  if (effects > 1) return 'duplicate';
  if (status === 'needs_human') return 'with_a_person';
  if (status !== 'completed') return 'failed';
  return effects === 1 ? 'exactly_once' : 'lost';
}

/**
 * A run that never came to its point tested nothing there: `not_reached` (a failure: the run went another way),
 * or, when the service kept it from the point, `kept_from_point` unless its outcome is itself a failure.
 */
function verdictOf(status: string, effects: number, reached: boolean, kept: boolean): CrashVerdict {
  const outcome = outcomeOf(status, effects);
  if (reached || outcome === 'duplicate') return outcome;
  if (!kept) return 'not_reached';
  return PASSING.includes(outcome) ? 'kept_from_point' : outcome;
}

/** What every case of one crashTest call shares. */
interface Kit {
  base: Record<string, string>;
  catalog: AgentCatalog;
  agent: string;
  opts: CrashTestOptions;
  script: Script;
  /** This call's namespace (see CrashReport.namespace). */
  namespace: string;
}

/** One case, on its own key prefix, once per attempt while the service keeps the run from the point. */
async function runCase(kit: Kit, target: Target, point: CrashPointName): Promise<CrashCase[]> {
  const attempts = Math.max(1, kit.opts.attempts ?? 3);
  for (let attempt = 1; ; attempt++) {
    const cases = await runAttempt(kit, target, point, `${kit.namespace}-${attempt}`);
    const kept = cases.some((c) => c.verdict === 'kept_from_point');
    const failed = cases.some((c) => !PASSING.includes(c.verdict));
    if (!kept || failed || attempt >= attempts) return cases.map((c) => ({ ...c, attempts: attempt }));
  }
}

/** Runs one attempt: its own prefix, a worker process killed at the point, an in-process worker that recovers the run. */
async function runAttempt(
  { base, catalog, agent, opts, script }: Kit,
  target: Target,
  point: CrashPointName,
  /** `<namespace>-<attempt>`: what makes this run's tenant, run id and keys its own. */
  tag: string,
): Promise<CrashCase[]> {
  const prefix = uniquePrefix(`ct${point}`);
  const env = { ...base, KEY_PREFIX: prefix, BULL_PREFIX: `${prefix}b` };
  const cfg: Config = loadConfig(env);
  const ctx = await createContext(cfg, 'crash-test', {
    agents: catalog,
    log: createLogger('crash-test', cfg.LOG_LEVEL),
    metrics: newMetrics(),
  });
  try {
    const tenant = `ct-${tag}-${point}-${target.step}`.replace(/_/g, '-');
    const spec = buildSpec(ctx, { tenant, agent, input: opts.input, model: 'scripted', script }, Date.now());
    await ctx.store.create(spec, Date.now());
    const victim = await spawnWorker(victimEnv(env, point, target.step), { startTimeoutMs: 120_000 });
    const outcome = await Promise.race([
      victim.exited.then(() => 'killed' as const),
      settled(ctx, spec.runId, 60_000).then(() => 'settled' as const),
    ]);
    if (outcome === 'settled') victim.child.kill('SIGKILL');
    const exit = await victim.exited;
    const reached = outcome === 'killed' && exit.signal === 'SIGKILL';
    let status = await settled(ctx, spec.runId, 0);
    if (!SETTLED.includes(status)) {
      const rescuer = new FleetWorker(ctx, { effects: createEffectRunner(ctx) });
      await rescuer.start();
      status = await settled(ctx, spec.runId, 60_000);
      await rescuer.stop(true);
    }
    const reason = (await ctx.redis.hget(ctx.keys.run(spec.runId).run, 'reason')) ?? undefined;
    const ledger = new Ledger(ctx.redis, ctx.keys);
    const quiet = await quietActions(ledger, spec.runId, opts.service, opts.settleTimeoutMs ?? 30_000);
    const actions = quiet ?? (await ledger.listForRun(spec.runId));
    const counted = await opts.service.effects();
    const kept = keptByService(actions, target.calls);
    const seen = new Map<string, number>();
    return target.calls.map(({ step, tool }): CrashCase => {
      // The n-th call of a tool in a step is its n-th action there.
      const n = seen.get(`${step}/${tool}`) ?? 0;
      seen.set(`${step}/${tool}`, n + 1);
      const action = actions.filter((a) => a.step === step && a.tool === tool)[n];
      const effects = action ? (counted[action.idempotencyKey] ?? counted[action.actionId] ?? 0) : 0;
      return {
        tool,
        point,
        step: target.step,
        runId: spec.runId,
        status,
        reason,
        effects,
        actionState: action?.state,
        evidence: action?.history.at(-1)?.evidence,
        verdict: quiet ? verdictOf(status, effects, reached, kept) : 'unsettled',
        attempts: 1,
      };
    });
  } finally {
    await ctx.close();
    const redis = new Redis(base.REDIS_URL!);
    await deletePrefix(redis, prefix);
    await deletePrefix(redis, `${prefix}b`);
    redis.disconnect();
  }
}

/** Runs `tasks` with at most `limit` at once, results in order. */
async function pooled<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results = new Array<T>(tasks.length);
  let next = 0;
  const lane = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane));
  return results;
}

function reportOf(cases: CrashCase[], namespace: string): CrashReport {
  return {
    cases,
    namespace,
    duplicates: cases.filter((c) => c.verdict === 'duplicate'),
    failures: cases.filter((c) => !PASSING.includes(c.verdict)),
    unreached: cases.filter((c) => c.verdict === 'kept_from_point'),
    summary: () =>
      cases
        .map(
          (c) =>
            `${c.tool} ${c.point}@${c.step}: ${c.verdict} (${c.effects} effect(s), ${c.status})` +
            (c.attempts > 1 ? ` after ${c.attempts} runs` : ''),
        )
        .join('\n'),
  };
}

export async function crashTest(opts: CrashTestOptions): Promise<CrashReport> {
  const embedded = (opts.redisUrl ?? process.env.REDIS_URL) === undefined ? await startEmbeddedRedis() : undefined;
  const base: Record<string, string> = {
    REDIS_URL: opts.redisUrl ?? process.env.REDIS_URL ?? embedded!.url,
    AGENTS_MODULE: opts.agentsModule,
    LOG_LEVEL: 'silent',
    // Short locks: a killed worker's step is taken over in about a second (the fence keeps it safe).
    LOCK_DURATION_MS: '1000',
    STALLED_INTERVAL_MS: '500',
    RECONCILE_DEADLINE_MS: '2000',
    RECONCILE_POLL_MS: '50',
    RETRY_BASE_MS: '5',
    RETRY_MAX_MS: '50',
    ...opts.service.env,
  };
  try {
    const catalog = await loadAgents(loadConfig(base), { ...process.env, ...opts.service.env });
    const agent = opts.agent ?? (catalog.names.length === 1 ? catalog.names[0]! : undefined);
    if (!agent || !catalog.get(agent))
      throw new TypeError(`crashTest: name the agent to run (the module has ${catalog.names.join(', ')})`);
    const script = plainScript(opts.script);
    const calls = writeCalls(catalog, agent, script);
    if (calls.length === 0) throw new TypeError(`crashTest: the script calls no write tool of '${agent}'`);
    const points = opts.points ?? CRASH_TEST_POINTS;
    // A namespace per call: its runs (tenant, run id, keys) are none of an earlier call's, whatever the service kept.
    const kit: Kit = { base, catalog, agent, opts, script, namespace: randomBytes(4).toString('hex') };
    const tasks = points.flatMap((p) => targetsOf(p, calls, script).map((t) => () => runCase(kit, t, p)));
    return reportOf((await pooled(tasks, opts.parallel ?? 3)).flat(), kit.namespace);
  } finally {
    await embedded?.stop();
  }
}
