/**
 * `npm run replay -- <runId> [--max-tokens N] [--max-steps N] [--max-attempts N] [--json]`
 * Reads the run's spec and journal from Redis (REDIS_URL) and replays it offline.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/config.js';
import { boot } from './boot.js';
import { createRedis, targetOf, waitForRedis } from '../store/connect.js';
import { KeySpace } from '../store/keys.js';
import { ShardQueues } from '../store/queues.js';
import { RunStore } from '../runs/store.js';
import { replayRun } from '../runs/replay.js';
import { loadAgents } from './loadAgents.js';
import { followUpTokens } from '../worker/followUp.js';
import { readRun } from '../store/runRecord.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'max-tokens': { type: 'string' },
    'max-steps': { type: 'string' },
    'max-attempts': { type: 'string' },
    json: { type: 'boolean' },
  },
});
const runId = positionals[0];
if (!runId) {
  console.error('usage: npm run replay -- <runId> [--max-tokens N] [--max-steps N] [--max-attempts N] [--json]');
  process.exit(2);
}
const { cfg, redis, agents } = await boot('replay', async () => {
  const cfg = loadConfig(process.env, { role: 'replay' });
  // The run's agent gives the input estimate the worker used (AGENTS_MODULE, as the worker loads it).
  const agents = await loadAgents(cfg);
  const target = targetOf(cfg);
  const redis = createRedis(target, 'replay');
  await waitForRedis(redis, target, cfg.REDIS_BOOT_TIMEOUT_MS);
  return { cfg, redis, agents };
});
const keys = new KeySpace(cfg.KEY_PREFIX, cfg.BULL_PREFIX, cfg.SHARDS);
const store = new RunStore(redis, keys, new ShardQueues(keys, redis), cfg.EVENTS_MAX_LEN);
const spec = await store.readSpec(runId);
if (!spec) {
  console.error(`run ${runId} not found`);
  process.exit(1);
}
const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
const agent = agents.get(spec.agent);
// A follow-up's previous conversation, as the worker froze it in the run hash, is in every estimate the worker made.
const previous = (await readRun(redis, keys, runId, ['followUpContext']))?.followUpContext ?? null;
const report = replayRun(spec, await store.transcript(runId), {
  completionCap: cfg.COMPLETION_TOKEN_CAP,
  ...(agent
    ? { inputTokens: agent.estimateInputTokens(spec.input) + followUpTokens(previous), tools: agent.tools.specs }
    : {}),
  ...(values['max-tokens'] ? { maxTokens: num(values['max-tokens'])! } : {}),
  ...(values['max-steps'] ? { maxSteps: num(values['max-steps'])! } : {}),
  ...(values['max-attempts'] ? { maxAttempts: num(values['max-attempts'])! } : {}),
});
if (values.json) console.log(JSON.stringify(report));
else {
  console.log(
    `run ${report.runId}: ${report.recordedSteps} recorded steps, replayed ${report.stepsReplayed}, would spend ${report.tokensSpent} tokens`,
  );
  console.log(
    report.stoppedAt
      ? `would stop at step ${report.stoppedAt.step}: ${report.stoppedAt.status} (${report.stoppedAt.reason})`
      : report.completed
        ? 'would complete'
        : 'journal ends before a final answer',
  );
}
redis.disconnect();
