/**
 * A hostile MCP server's schemas in a real worker process with short locks: the model's argument that makes the
 * server's pattern (`^(a+)+$`) backtrack for hours, and an answer that does the same to its output schema. The
 * worker keeps answering /healthz and keeps its step's lock (no stall, no redelivery); the run completes with the
 * argument refused as a format error and the answer as a tool error.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { killAll, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { until } from '../../testkit/until.js';
import { buildSpec } from '../../src/producer/intake.js';
import { createContext } from '../../src/server/buildContext.js';
import { loadAgents } from '../../src/server/loadAgents.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';

const LOCKS = {
  LOCK_DURATION_MS: '1000',
  STALLED_INTERVAL_MS: '500',
  AGENTS_MODULE: 'test/fixtures/hostileMcpAgents.ts',
};
const usage = { promptTokens: 10, completionTokens: 5 };

let h: Harness;
const procs: WorkerProcess[] = [];
beforeEach(async () => {
  h = await createHarness('mcphostilew', LOCKS);
});
afterEach(async () => {
  killAll(procs);
  await h.close();
});

describe('a hostile MCP server in a worker process', () => {
  it(
    'its catastrophic patterns starve nothing: /healthz answers, the lock is kept, the run completes',
    { timeout: 240_000 },
    async () => {
      const agents = await loadAgents(h.cfg);
      const ctx = await createContext(h.cfg, 'mcphostilew', { agents });
      try {
        const spec = buildSpec(
          ctx,
          {
            tenant: 'acme',
            agent: 'mcp-hostile',
            input: { id: 'H-1' },
            model: 'scripted',
            script: scriptSchema.parse([
              { toolCalls: [{ name: 'match', args: { s: `${'a'.repeat(34)}!` } }], usage },
              { toolCalls: [{ name: 'echo_match', args: { s: 'x' } }], usage },
              { toolCalls: [], final: 'done', usage },
            ]),
          },
          Date.now(),
        );
        await ctx.store.create(spec, Date.now());
        const worker = await spawnWorker(h.env, { startTimeoutMs: 120_000 });
        procs.push(worker);
        const port = (JSON.parse(worker.lines.find((l) => l.includes('"worker_started"'))!) as { metricsPort: number })
          .metricsPort;
        // Every probe answers while the run goes on (a blocked event loop answers none: the wait times out).
        let probes = 0;
        await until('the run completed, /healthz answering all along', 120_000, async () => {
          const health = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) });
          expect(health.status).toBe(200);
          probes++;
          return (await h.ctx.store.readState(spec.runId))?.status === 'completed';
        });
        expect(probes).toBeGreaterThan(0);
        const transcript = await h.ctx.store.transcript(spec.runId);
        const observations = transcript.filter((e) => e.kind === 'observation');
        expect(observations.map((o) => [o.tool, o.status])).toEqual([
          ['match', 'format_error'],
          ['echo_match', 'tool_error'],
        ]);
        // One delivery per step: no lock lost, no stall, no redelivery.
        expect(transcript.filter((e) => e.kind === 'decision').map((e) => e.step)).toEqual([1, 2, 3]);
        expect(worker.lines.some((l) => /"code":"(lock_lost|stalled)/.test(l))).toBe(false);
        // The tools the server listed out of bounds: named at boot, counted in the metrics.
        expect(worker.lines.filter((l) => l.includes('"code":"mcp_schema_refused"')).length).toBe(2);
        const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(metrics).toMatch(/agent_tool_schemas_refused\{source="mcp:hostile",reason="combinators_too_deep"\} 1/);
        expect(metrics).toMatch(/agent_tool_source_up\{source="mcp:hostile"\} 1/);
      } finally {
        await ctx.close();
      }
    },
  );
});
