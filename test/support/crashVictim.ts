/**
 * The crash tests' run and victim: a scripted support run created as the producer creates it, and a worker process
 * that SIGKILLs itself at a named crash point, its lock short so that the next owner takes its job soon.
 */
import { buildSpec } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker, type WorkerProcess } from '../../testkit/processes.js';

/** The victim's lock: 1 s, its stalls checked every 500 ms. */
export const SHORT_LOCK = { LOCK_DURATION_MS: '1000', STALLED_INTERVAL_MS: '500' };

/** A run of the support agent on ticket `ticketId`, its model playing `script`, at most `maxSteps` steps; its id. */
export async function scriptedRun(h: Harness, ticketId: string, script: Script, maxSteps = 10): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(ticketId), budget: { maxSteps }, agent: { model: 'scripted', script } },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

/** A worker process on the harness's env and `env`, armed with `crashPoint` (`<point>[@<step>]`). */
export function spawnVictim(h: Harness, crashPoint: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  return spawnWorker({ ...h.env, ...SHORT_LOCK, ...env }, { crashPoint });
}
