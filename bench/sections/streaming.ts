/**
 * Section "streaming": what MODEL_STREAMING costs. One-step runs whose answer is
 * about 2,000 tokens (8,000 characters), answered by the local OpenAI server
 * (testkit/modelServers/openai.ts, 8-character SSE pieces) through the real
 * provider and an in-process worker, with streaming off and on, alternating:
 *   - events per streamed answer (text_delta entries in the run's stream), at
 *     full speed and with the server dribbling one piece per millisecond;
 *   - run latency create -> completed, streaming on minus off (the added latency
 *     of a step: the batched fenced writes, streamed parsing instead of one body);
 *   - the provider alone, streamed vs not (no engine, no Redis): how much of the
 *     added latency is the AI SDK reading 1,000 SSE chunks.
 */
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { buildSpec } from '../../src/producer/intake.js';
import { startOpenAIServer } from '../../testkit/modelServers/openai.js';
import type { ModelServer } from '../../testkit/modelServers/queue.js';
import { AiSdkProvider, openAIOptions } from '../../src/models/aiSdk.js';
import { dist, round } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Metric, Section, SectionResult } from '../lib/types.js';
import { readAllEvents } from '../../src/store/runEvents.js';

const ANSWER = Array.from(
  { length: 120 },
  (_, i) => `Sentence ${i}: the replacement ships today and tracking follows by email. `,
)
  .join('')
  .slice(0, 8000);

export const streaming: Section = {
  name: 'streaming',
  title: 'Streamed answers: events per 2,000-token answer, latency per step with MODEL_STREAMING on vs off',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runsPerMode = opts.quick ? 15 : 60;
    const server = await startOpenAIServer();
    env.onCleanup(() => server.close());
    server.fallback = { kind: 'turn', text: ANSWER, usage: { input: 400, output: 2000 } };
    const on = await world(env, server, true);
    const off = await world(env, server, false);
    const lat: Record<'on' | 'off', number[]> = { on: [], off: [] };
    let n = 0;
    const once = async (w: World) => {
      const t0 = performance.now();
      const runId = await w.start(`B-${n++}`);
      await w.done(runId);
      return { ms: performance.now() - t0, runId };
    };
    // Warm-up: JIT, script loads, connections.
    for (let i = 0; i < 5; i++) await Promise.all([once(on), once(off)].map((p) => p.catch(() => undefined)));
    const eventCounts: number[] = [];
    for (let i = 0; i < runsPerMode; i++) {
      for (const [mode, w] of (i % 2 === 0
        ? [
            ['on', on],
            ['off', off],
          ]
        : [
            ['off', off],
            ['on', on],
          ]) as ['on' | 'off', World][]) {
        const r = await once(w);
        lat[mode].push(r.ms);
        if (mode === 'on') eventCounts.push(await w.deltaEvents(r.runId));
      }
    }
    // A model that writes: one 8-character piece per ms (about 1.2 s for the answer with timer granularity).
    server.enqueue({ kind: 'turn', text: ANSWER, usage: { input: 400, output: 2000 }, eventDelayMs: 1 });
    const slow = await once(on);
    const slowEvents = await on.deltaEvents(slow.runId);
    await Promise.all([on.close(), off.close()]);
    const provider = await providerAlone(server, runsPerMode);

    const dOn = dist(lat.on);
    const dOff = dist(lat.off);
    const metrics: Metric[] = [
      {
        key: 'events_per_answer_fast',
        label: 'text_delta events per 2,000-token answer (server at full speed)',
        value: dist(eventCounts).p50,
        unit: 'events',
        note: `flush ${on.cfg.MODEL_STREAM_FLUSH_CHARS} chars / ${on.cfg.MODEL_STREAM_FLUSH_MS} ms; 1,000 SSE pieces in`,
      },
      {
        key: 'events_per_answer_dribbled',
        label: 'text_delta events per 2,000-token answer (dribbled, 1 piece/ms)',
        value: slowEvents,
        unit: 'events',
        note: `answer took ${round(slow.ms, 0)} ms`,
      },
      {
        key: 'added_latency_p50_ms',
        label: 'added latency per step, p50 (on - off)',
        value: round(dOn.p50 - dOff.p50, 2),
        unit: 'ms',
        note: `on ${round(dOn.p50, 2)} vs off ${round(dOff.p50, 2)}`,
      },
      {
        key: 'provider_stream_cost_p50_ms',
        label: 'of which the AI SDK reading the stream, p50 (streamText - generateText)',
        value: round(provider.stream.p50 - provider.generate.p50, 2),
        unit: 'ms',
        note: `stream ${round(provider.stream.p50, 2)} vs generate ${round(provider.generate.p50, 2)}, no engine`,
      },
      {
        key: 'added_latency_p90_ms',
        label: 'added latency per step, p90 (on - off)',
        value: round(dOn.p90 - dOff.p90, 2),
        unit: 'ms',
        note: `on ${round(dOn.p90, 2)} vs off ${round(dOff.p90, 2)}`,
      },
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      details: { runsPerMode, answerChars: ANSWER.length, on: dOn, off: dOff, eventCounts, provider },
    };
  },
};

/** The provider's complete() alone, streamed (deltas to a no-op) and not, alternating. */
async function providerAlone(
  server: ModelServer,
  n: number,
): Promise<{ stream: ReturnType<typeof dist>; generate: ReturnType<typeof dist> }> {
  const p = new AiSdkProvider(
    openAIOptions({ baseUrl: `${server.url}/v1`, apiKey: 'sk-bench', model: 'gpt-4o-mini', timeoutMs: 60_000 }),
  );
  const req = {
    runId: 'r',
    step: 1,
    attempt: 1,
    instructions: 'i',
    prompt: 'p',
    tools: [],
    maxCompletionTokens: 4096,
    signal: new AbortController().signal,
  };
  const times = { stream: [] as number[], generate: [] as number[] };
  for (let i = 0; i < n + 3; i++) {
    for (const mode of ['stream', 'generate'] as const) {
      const t0 = performance.now();
      await p.complete(mode === 'stream' ? { ...req, onTextDelta: () => {} } : req);
      if (i >= 3) times[mode].push(performance.now() - t0);
    }
  }
  return { stream: dist(times.stream), generate: dist(times.generate) };
}

interface World {
  cfg: EngineContext['cfg'];
  start(ticket: string): Promise<string>;
  done(runId: string): Promise<void>;
  deltaEvents(runId: string): Promise<number>;
  close(): Promise<void>;
}

/** A context and an in-process worker on the bench Redis, under their own prefix, streaming on or off. */
async function world(env: BenchEnv, server: ModelServer, streaming: boolean): Promise<World> {
  const prefix = streaming ? 'bstron' : 'bstroff';
  const cfg = loadConfig({
    ...env.appEnv,
    KEY_PREFIX: prefix,
    BULL_PREFIX: `${prefix}q`,
    WORKER_CONCURRENCY: '1',
    OPENAI_BASE_URL: `${server.url}/v1`,
    OPENAI_API_KEY: 'sk-bench',
    MODEL_STREAMING: String(streaming),
    COMPLETION_TOKEN_CAP: '4096',
  });
  const ctx = await createContext(cfg, `bench-${prefix}`, {
    log: createLogger('bench', cfg.LOG_LEVEL),
    metrics: newMetrics(),
  });
  const worker = new FleetWorker(ctx, {});
  await worker.start();
  return {
    cfg,
    async start(ticket) {
      const spec = buildSpec(
        ctx,
        {
          tenant: 'acme',
          ticket: {
            id: ticket,
            subject: 'Broken mug',
            body: 'My order arrived broken.',
            customer: { email: 'ada@example.com', name: 'Ada' },
          },
          agent: { model: 'openai' },
        },
        Date.now(),
      );
      await ctx.store.create(spec, Date.now());
      return spec.runId;
    },
    async done(runId) {
      for (;;) {
        const s = await ctx.redis.hget(ctx.keys.run(runId).run, 'status');
        if (s === 'completed') return;
        if (s === 'failed' || s === 'needs_human' || s === 'budget_exceeded')
          throw new Error(`bench run ${runId} ended ${s}`);
        await new Promise((r) => setTimeout(r, 1));
      }
    },
    async deltaEvents(runId) {
      const events = await readAllEvents(ctx.redis, ctx.keys.run(runId));
      return events.filter((e) => e.type === 'text_delta').length;
    },
    async close() {
      await worker.stop(true);
      await ctx.close();
    },
  };
}
