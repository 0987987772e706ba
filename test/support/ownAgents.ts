/**
 * A harness whose worker and API run the test's own agents: a context of its own on the harness's Redis, prefix and
 * configuration (the harness's context runs the support agent), closed with the harness.
 */
import type { FleetWorkerOptions } from '../../src/worker/fleetWorker.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { createContext, type ContextOptions } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

export interface OwnAgents {
  h: Harness;
  /** The context of the test's agents, which the worker and the API run on. */
  ctx: EngineContext;
  /** The API's address. */
  url: string;
}

/** A harness `name` with `env`, its worker (options made from the context: `worker`) and API on `agents`. */
export async function withOwnAgents(
  name: string,
  agents: NonNullable<ContextOptions['agents']>,
  env: Record<string, string> = {},
  worker: (ctx: EngineContext) => FleetWorkerOptions = () => ({}),
): Promise<OwnAgents> {
  const h = await createHarness(name, env);
  const ctx = await createContext(h.cfg, `${name}-agents`, { log: h.ctx.log, metrics: newMetrics(), agents });
  await h.startWorker(worker(ctx), ctx);
  return { h, ctx, url: (await h.startApi(ctx)).url };
}
