/**
 * Section "ratelimit": the fleet against a provider's own rate limit. The local OpenAI-wire server
 * (testkit/modelServers/openai.ts) holds 1,200 requests and 900,000 tokens per minute (each bucket
 * holding 3 s of refill) and answers 429 past either; every answer costs 1,000 tokens, so tokens
 * bind first: 900 calls a minute. Two worker processes run support-agent runs (one model call each,
 * the real OpenAI provider) with the fleet's buckets at 95 % of the server's limits
 * (`MODEL_RATE_LIMITS`, `MODEL_RATE_BURST_MS=1000`), and once with no fleet bucket at all. More runs
 * are created at once than the limit lets through in the window, so the fleet is never short of work.
 * Measured: 429s over all calls; calls answered per minute in a window that starts 5 s after the
 * first call (past both bursts), against the limit.
 */
import { round } from '../lib/stats.js';
import {
  atLeast,
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { createMany, flowContext, sleep, startFleet, stopFleet } from '../lib/flowFleet.js';
import { startOpenAIServer, type OpenAIServer } from '../../testkit/modelServers/openai.js';

const SERVER = { rpm: 1200, tpm: 900_000, burstMs: 3000 };
const TOKENS_PER_CALL = 1000;
const FLEET_SHARE = 0.95;
/** Calls a minute the server lets through: the tighter of its two limits. */
const LIMIT_CALLS_PER_MIN = Math.min(SERVER.rpm, SERVER.tpm / TOKENS_PER_CALL);
const SETTLE_MS = 5000;

interface Sample {
  at: number;
  calls: number;
  refused: number;
}

interface ModeResult {
  calls: number;
  refused: number;
  windowS: number;
  answeredPerMin: number;
}

export const rateLimit: Section = {
  name: 'ratelimit',
  title: 'Model rate limit: the fleet just under the local OpenAI server’s RPM/TPM (2 worker processes)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const windowMs = opts.quick ? 20_000 : opts.fullSize ? 180_000 : 60_000;
    const fleetLimits = [
      {
        provider: 'openai',
        model: 'gpt-4o-mini',
        rpm: Math.floor(SERVER.rpm * FLEET_SHARE),
        tpm: Math.floor(SERVER.tpm * FLEET_SHARE),
      },
    ];
    const on = await runMode(env, fleetLimits, windowMs);
    const off = await runMode(env, [], Math.min(windowMs, 20_000));
    const share = (r: ModeResult) => round((100 * r.refused) / Math.max(1, r.calls), 2);
    const ratio = (r: ModeResult) => round(r.answeredPerMin / LIMIT_CALLS_PER_MIN, 3);
    const metrics: Metric[] = [
      atMost(
        'refused_pct',
        '429s, share of calls, fleet bucket at 95 %',
        share(on),
        '%',
        1,
        `${on.refused} of ${on.calls}`,
      ),
      atLeast(
        'throughput_vs_limit',
        'calls answered per minute / the limit, fleet bucket at 95 %',
        ratio(on),
        'x',
        0.9,
        `${round(on.answeredPerMin)} of ${LIMIT_CALLS_PER_MIN} a minute over ${on.windowS} s`,
      ),
      {
        key: 'refused_pct_no_bucket',
        label: '429s, share of calls, no fleet bucket',
        value: share(off),
        unit: '%',
        note: `${off.refused} of ${off.calls}`,
      },
      {
        key: 'throughput_vs_limit_no_bucket',
        label: 'calls answered per minute / the limit, no fleet bucket',
        value: ratio(off),
        unit: 'x',
        note: `over ${off.windowS} s`,
      },
    ];
    return {
      name: 'ratelimit',
      title: this.title,
      metrics,
      details: { server: SERVER, tokensPerCall: TOKENS_PER_CALL, fleetLimits, withBucket: on, noBucket: off },
    };
  },
};

async function runMode(env: BenchEnv, limits: object[], windowMs: number): Promise<ModeResult> {
  await env.reset();
  const server: OpenAIServer = await startOpenAIServer({ limits: SERVER });
  server.fallback = {
    kind: 'turn',
    text: 'done',
    usage: { input: TOKENS_PER_CALL - 200, output: 200 },
  };
  const fleetEnv = {
    OPENAI_BASE_URL: `${server.url}/v1`,
    OPENAI_API_KEY: 'sk-bench',
    OPENAI_MODEL: 'gpt-4o-mini',
    MODEL_RATE_LIMITS: JSON.stringify(limits),
    MODEL_RATE_BURST_MS: '1000',
    MODEL_MAX_ATTEMPTS: '10',
  };
  const ctx = await flowContext(env, `bench-rate-${limits.length}`, fleetEnv);
  const fleet = await startFleet(env, ctx, 2, fleetEnv);
  try {
    const runs = Math.ceil(((LIMIT_CALLS_PER_MIN / 60_000) * (windowMs + 2 * SETTLE_MS) + SERVER.rpm / 20) * 1.3);
    const tag = Date.now().toString(36);
    await createMany(
      ctx,
      'tenant-r',
      Array.from({ length: runs }, (_, i) => `R-${tag}-${i}`),
      { model: 'openai' },
    );
    while (server.requests.length === 0) await sleep(20);
    const firstAt = server.requests[0]!.at;
    await sleep(Math.max(0, firstAt + SETTLE_MS - Date.now()));
    const start = sample(server);
    await sleep(windowMs);
    const end = sample(server);
    const answered = end.calls - end.refused - (start.calls - start.refused);
    return {
      calls: end.calls,
      refused: end.refused,
      windowS: round((end.at - start.at) / 1000, 1),
      answeredPerMin: (answered * 60_000) / (end.at - start.at),
    };
  } finally {
    await stopFleet(fleet);
    await server.close();
  }
}

function sample(server: OpenAIServer): Sample {
  return { at: Date.now(), calls: server.requests.length, refused: server.limited };
}
