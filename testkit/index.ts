/**
 * The test kit (package.json "exports" "./testkit"): what a team needs to test its own agents
 * against the real thing, with no mocks.
 *
 * @example
 * import { startEmbeddedRedis, startOpenAIServer, uniquePrefix } from 'durable-agent-fleet/testkit';
 *
 * const redis = await startEmbeddedRedis();            // redis-server from PATH, AOF on, noeviction
 * const model = await startOpenAIServer();             // the OpenAI Chat Completions wire, scripted replies
 * const env = { REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('orders'), OPENAI_BASE_URL: model.url };
 */
export {
  startEmbeddedRedis,
  freePort,
  redisServerOnPath,
  type EmbeddedRedis,
  type EmbeddedOptions,
} from './embeddedRedis.js';
export { startLocalCluster, type LocalCluster } from './cluster.js';
export { uniquePrefix, deletePrefix } from './keyPrefix.js';
export { startOpenAIServer } from './modelServers/openai.js';
export { startAnthropicServer } from './modelServers/anthropic.js';
export type { ModelServer, Reply, TurnReply, ErrorReply, RawReply, RecordedRequest } from './modelServers/queue.js';
export { scriptResponder } from './modelServers/scriptPlayer.js';
export { parseSseBlock, readSse, type SseEvent } from './sse.js';
export { readRunEvents, type RunEvent } from './runEvents.js';
export {
  startMcpHttpServer,
  bookingServer,
  BookingStore,
  type Booking,
  type BookingOptions,
  type McpHttpHandle,
} from './mcpServer.js';
export {
  crashTest,
  STEP_CRASH_POINTS,
  ANSWER_CRASH_POINTS,
  CRASH_TEST_POINTS,
  type CrashTestOptions,
  type CrashTestService,
  type CrashReport,
  type CrashCase,
  type CrashVerdict,
} from './crashTest.js';
