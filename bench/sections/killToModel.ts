/**
 * Section "killtomodel": from a worker process's SIGKILL in the middle of a model call to the same step's model call
 * arriving at the model server from ANOTHER worker process: the whole recovery a user waits for, not only the job's
 * restart (the "recovery" section times that part).
 *
 * A run of 20 steps of the support agent (a read each step, then its answer) talks to a local OpenAI-compatible
 * server over HTTP through the real provider. The server answers every turn at once, except the first call of step 10,
 * which it holds open. Two worker processes (src/server/worker.ts, default lock of 20 s and owner watch) are live; the
 * one holding step 10 (its lock token names it) gets SIGKILL 50 ms after that call arrived, at T. Reported, per trial:
 * the step job's new `processedOn` - T (the job taken again), and the second step-10 call's arrival - T (the model
 * asked again). The run must then complete. A fresh worker process replaces the victim before the next trial.
 * The trials run twice: on workers started as the image starts them (`node` on the module, compiled when the bench
 * runs from dist/) and on workers started by `npm run worker` as the README does (npm, then node with the tsx loader
 * on the sources); the SIGKILL goes to the worker's node process either way.
 */
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import { createContext } from '../../src/server/buildContext.js';
import { stepJobId } from '../../src/store/keys.js';
import { ownerBaseOfToken } from '../../src/store/bullmqInternals.js';
import { startOpenAIServer } from '../../testkit/modelServers/openai.js';
import type { RecordedRequest, Reply } from '../../testkit/modelServers/queue.js';
import { killAll, killPid, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { dist, round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { TENANT, ticket } from '../lib/workload.js';

const STEPS = 20;
const HELD_STEP = 10;
const KILL_AFTER_MS = 50;
export const MODEL_RECOVERY_P50_TARGET_S = 0.1;
export const MODEL_RECOVERY_P99_TARGET_S = 0.15;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | null | undefined> | T | null | undefined, ms: number) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** The step a chat request is for: one more than the assistant turns already in its conversation. */
const stepOf = (req: RecordedRequest) =>
  (Array.isArray(req.body.messages) ? (req.body.messages as { role?: string }[]) : []).filter(
    (m) => m.role === 'assistant',
  ).length + 1;
const conversationOf = (req: RecordedRequest) => {
  const first = (req.body.messages as { role?: string; content?: unknown }[] | undefined)?.find(
    (m) => m.role === 'user',
  );
  return typeof first?.content === 'string' ? first.content : JSON.stringify(first?.content ?? '');
};

interface Trial {
  jobRestartMs: number;
  modelCallMs: number;
}

/**
 * How the worker processes are started: `node` runs the module as the image does (compiled, when the bench runs from
 * dist/), `npm` runs `npm run worker` as the README does (npm, then node with the tsx loader on the sources).
 */
const LAUNCHES = ['node', 'npm'] as const;
type Launch = (typeof LAUNCHES)[number];
const LAUNCH_LABEL: Record<Launch, string> = {
  node: 'node (the module as this bench runs it)',
  npm: '`npm run worker`',
};

/** The figures of one launch's trials; the compiled launch keeps the section's original keys. */
function launchMetrics(launch: Launch, trials: Trial[]): Metric[] {
  const key = launch === 'node' ? 'killtomodel' : `killtomodel.${launch}`;
  const by = launch === 'node' ? '' : ` (${LAUNCH_LABEL[launch]})`;
  const model = dist(trials.map((x) => x.modelCallMs / 1000));
  const job = dist(trials.map((x) => x.jobRestartMs / 1000));
  return [
    atMost(
      `${key}.p50`,
      `SIGKILL -> the model called again, p50${by}`,
      round(model.p50, 3),
      's',
      MODEL_RECOVERY_P50_TARGET_S,
    ),
    atMost(
      `${key}.p99`,
      `SIGKILL -> the model called again, p99${by}`,
      round(model.p99, 3),
      's',
      MODEL_RECOVERY_P99_TARGET_S,
    ),
    {
      key: `${key}.job.p50`,
      label: `SIGKILL -> the step job taken again, p50${by}`,
      value: round(job.p50, 3),
      unit: 's',
    },
    {
      key: `${key}.job.p99`,
      label: `SIGKILL -> the step job taken again, p99${by}`,
      value: round(job.p99, 3),
      unit: 's',
    },
  ];
}

export const killToModel: Section = {
  name: 'killtomodel',
  title: `SIGKILL ${KILL_AFTER_MS} ms into step ${HELD_STEP}'s model call -> that call again from another worker process (${STEPS}-step runs, lock 20 s)`,
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const n = opts.quick ? 5 : 20;
    const server = await startOpenAIServer();
    env.onCleanup(() => server.close());
    const held = new Set<string>();
    let lastHeld: string | undefined;
    server.respond = (req): Reply => {
      const step = stepOf(req);
      const conversation = step === HELD_STEP ? conversationOf(req) : undefined;
      if (conversation !== undefined && !held.has(conversation)) {
        held.add(conversation);
        lastHeld = conversation;
        return { kind: 'hold' };
      }
      if (step >= STEPS) return { kind: 'turn', text: 'done', usage: { input: 100, output: 10 } };
      return { kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage: { input: 100, output: 10 } };
    };
    const procEnv = {
      ...env.appEnv,
      OPENAI_COMPATIBLE_BASE_URL: `${server.url}/v1`,
      OPENAI_COMPATIBLE_MODEL: 'bench-local',
    };
    // The bench's own context has no model provider: runs naming this one are created through a context that has.
    const cfg = loadConfig(procEnv);
    const ctx = await createContext(cfg, 'bench-killtomodel', {
      log: createLogger('bench', cfg.LOG_LEVEL),
      metrics: newMetrics(),
    });
    env.onCleanup(() => ctx.close());
    const live: WorkerProcess[] = [];
    env.onCleanup(() => killAll(live));
    const byLaunch = {} as Record<Launch, Trial[]>;
    // The section's workers end with it: left running, they would take the next sections' jobs from the same queues.
    try {
      for (const launch of LAUNCHES) byLaunch[launch] = await trialsOf(launch, n);
    } finally {
      killAll(live);
    }

    /** `n` trials on two workers started by `launch`, a fresh one replacing each victim. */
    async function trialsOf(launch: Launch, n: number): Promise<Trial[]> {
      const start = async () => {
        const w = await spawnWorker(procEnv, { keep: 'lifecycle', launch, startTimeoutMs: 90_000 });
        live.push(w);
        return w;
      };
      const trials: Trial[] = [];
      let pair: WorkerProcess[] = await Promise.all([start(), start()]);
      for (let t = 0; t < n; t++) {
        const spec = buildSpec(
          ctx,
          {
            tenant: TENANT,
            agent: 'support',
            input: ticket(`KTM-${launch}-${Date.now()}-${t}`),
            model: 'openai-compatible',
            budget: { maxSteps: STEPS + 5 },
          },
          Date.now(),
        );
        if (!(await ctx.store.create(spec, Date.now()))) throw new Error('run already existed');
        const runId = spec.runId;
        lastHeld = undefined;
        // The i-th call of this trial's step 10 (the held conversation is this trial's: one run at a time).
        const asked = (i: number) =>
          lastHeld === undefined
            ? undefined
            : server.requests.filter((r) => stepOf(r) === HELD_STEP && conversationOf(r) === lastHeld)[i - 1];
        const first = await until(`trial ${t}: step ${HELD_STEP}'s model call`, () => asked(1), 60_000);
        const shard = ctx.keys.shardOf(runId);
        const jobId = stepJobId(runId, HELD_STEP);
        const token = await until('the step lock', () => ctx.redis.get(ctx.keys.jobLock(shard, jobId)), 5_000);
        const base = ownerBaseOfToken(token);
        const victim = pair.find((w) => w.bullIds.some((id) => id.split('@')[0] === base));
        if (!victim) throw new Error(`trial ${t}: step ${HELD_STEP}'s lock (${token}) names neither worker`);
        await sleep(Math.max(0, first.at + KILL_AFTER_MS - Date.now()));
        const killedAt = Date.now();
        // The worker's own process (under `npm run worker`, npm's child), as a node failure or the OOM killer does.
        killPid(victim.pid);
        const again = await until(`trial ${t}: step ${HELD_STEP}'s second model call`, () => asked(2), 60_000);
        const processedOn = Number(await ctx.redis.hget(ctx.keys.jobHash(shard, jobId), 'processedOn'));
        trials.push({ jobRestartMs: processedOn - killedAt, modelCallMs: again.at - killedAt });
        await until(
          `trial ${t}: the run completes`,
          async () => ((await ctx.store.readState(runId))?.status === 'completed' ? true : undefined),
          60_000,
        );
        await victim.exited;
        live.splice(live.indexOf(victim), 1);
        pair = [...pair.filter((w) => w !== victim), await start()];
      }
      killAll(pair);
      for (const w of pair) live.splice(live.indexOf(w), 1);
      return trials;
    }

    const metrics: Metric[] = LAUNCHES.flatMap((launch) => launchMetrics(launch, byLaunch[launch]));
    return {
      name: 'killtomodel',
      title: killToModel.title,
      metrics,
      tables: LAUNCHES.map((launch) => ({
        title: `trials, workers started by ${LAUNCH_LABEL[launch]} (ms after the SIGKILL)`,
        header: ['trial', 'job taken again', 'model called again'],
        rows: byLaunch[launch].map((x, i) => [i + 1, x.jobRestartMs, x.modelCallMs]),
      })),
      details: { trials: byLaunch },
    };
  },
};
