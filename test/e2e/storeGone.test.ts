/**
 * A worker whose store is gone: Redis SIGKILLed under a worker process holding a step, then SIGTERM. Nothing can be
 * handed back, so the worker leaves within its grace, saying why (`store_gone`, the jobs it held), instead of waiting
 * out the grace and its margin against a store that does not come back (src/server/worker.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { killAll, spawnWorker, type SpawnedProcess } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { until } from '../../testkit/until.js';

const GRACE_MS = 4000;
const procs: SpawnedProcess[] = [];
let redis: EmbeddedRedis | undefined;
let h: Harness | undefined;
afterEach(async () => {
  killAll(procs);
  // The harness deletes its keys and closes its connections on a Redis that answers.
  await redis?.restart();
  await h?.close();
  await redis?.stop();
});

describe('a worker whose store is gone', () => {
  it('leaves on SIGTERM within its grace, naming the step it could not hand back', async () => {
    redis = await startEmbeddedRedis();
    h = await createHarness('store-gone', { REDIS_URL: redis.url });
    // Step 2 reads the knowledge base, which does not answer: the worker holds that step.
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 60_000 }]);
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('SG-1'), budget: { maxSteps: 25 } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const worker = await spawnWorker({ ...h.env, SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    procs.push(worker);
    const step2 = `${spec.runId}.s2`;
    // The knowledge base holding the worker's read is the proof the worker runs step 2. The job being active in Redis
    // is not: the worker may not have received BullMQ's answer yet when Redis dies, and then it holds nothing.
    const sandbox = h.sandbox;
    await until('step 2 held', 30_000, () => sandbox.held() > 0);
    await redis.kill('SIGKILL');
    const sentAt = Date.now();
    worker.child.kill('SIGTERM');
    const exit = await worker.exited;
    expect(exit.at - sentAt, worker.lines.slice(-5).join('\n')).toBeLessThan(GRACE_MS);
    expect(exit.code).toBe(1);
    const why = worker.lines.find((l) => l.includes('"store_gone"'));
    expect(why, worker.lines.slice(-5).join('\n')).toBeDefined();
    expect((JSON.parse(why!) as { held: string[] }).held).toEqual([step2]);
  }, 90_000);
});
