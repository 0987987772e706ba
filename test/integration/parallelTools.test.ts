/**
 * Parallel tool calls on real Redis with a real worker: a step of three 200 ms reads takes about 200 ms (a
 * behavioural check of concurrency, not a benchmark), and writes of one turn each go through the ledger with
 * their own key, at once, one effect each at the service, their observations back to the model in its order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { defineAgent, defineReadTool, defineWriteTool } from '../../src/index.js';
import { createContext } from '../../src/server/buildContext.js';
import { buildSpec } from '../../src/producer/intake.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import { toMessages } from '../../src/models/aiSdk.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Effects the stand-in service holds, per idempotency key. */
const effects = new Map<string, number>();

const agent = defineAgent({
  name: 'parallel',
  version: 'parallel@1',
  input: z.object({ id: z.string() }).strict(),
  key: (i) => i.id,
  instructions: () => 'Read and note.',
  tools: [
    defineReadTool({
      name: 'slow_read',
      description: 'reads slowly',
      args: z.object({ ms: z.number() }),
      execute: async ({ ms }) => (await sleep(ms), { read: ms }),
    }),
    defineWriteTool({
      name: 'note',
      description: 'notes',
      args: z.object({ text: z.string(), ms: z.number() }),
      service: { enforcesKey: true, reconcile: 'none' },
      async dispatch({ text, ms }, _ctx, req) {
        await sleep(ms);
        effects.set(req.idempotencyKey, (effects.get(req.idempotencyKey) ?? 0) + 1);
        return { receipt: `n_${text}`, output: { noted: text }, replayed: false };
      },
    }),
  ],
});

let h: Harness;
let ctx: EngineContext;
beforeAll(async () => {
  h = await createHarness('parallel');
  ctx = await createContext(h.cfg, 'parallel', { agents: [agent] });
  await h.startWorker({}, ctx);
});
afterAll(async () => {
  await h.close();
});

async function start(id: string, turns: unknown[]): Promise<string> {
  const spec = buildSpec(
    ctx,
    { tenant: 'acme', agent: 'parallel', input: { id }, model: 'scripted', script: scriptSchema.parse(turns) },
    Date.now(),
  );
  await ctx.store.create(spec, Date.now());
  return spec.runId;
}

const usage = { promptTokens: 10, completionTokens: 2 };
const done = { final: 'done', usage };

/** Step 1's time from its start to its commit, from the run's events (the stream id carries the commit's ms). */
async function stepOneMs(runId: string): Promise<number> {
  const events = await readRunEvents(ctx, runId);
  const started = events.find((e) => e.type === 'step_started' && JSON.parse(e.data).step === 1);
  const committed = events.find((e) => e.type === 'step_committed' && JSON.parse(e.data).step === 1);
  return Number(committed!.entry.split('-')[0]) - (JSON.parse(started!.data) as { startedAt: number }).startedAt;
}

describe('parallel tool calls', () => {
  it('a step of three 200 ms reads takes about 200 ms, not 600', async () => {
    const reads = Array.from({ length: 3 }, () => ({ name: 'slow_read', args: { ms: 200 } }));
    const runId = await start('P-1', [{ toolCalls: reads, usage }, done]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const ms = await stepOneMs(runId);
    expect(ms).toBeGreaterThanOrEqual(195);
    expect(ms).toBeLessThan(450);
  });

  it('writes of one turn run at once, one effect each at the service; results reach the model in its order', async () => {
    const calls = [
      { name: 'note', args: { text: 'slow', ms: 250 } },
      { name: 'slow_read', args: { ms: 1 } },
      { name: 'note', args: { text: 'fast', ms: 1 } },
    ];
    const runId = await start('P-2', [{ toolCalls: calls, usage }, done]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(await stepOneMs(runId)).toBeLessThan(500);
    const transcript = await ctx.store.transcript(runId);
    const observed = transcript.filter((e) => e.kind === 'observation');
    // Journalled as they finished (the slow write last)...
    expect(observed.map((o) => o.callId).at(-1)).toBe(transcript.find((e) => e.kind === 'decision')!.toolCalls[0]!.id);
    expect(observed.filter((o) => o.actionId).map((o) => o.status)).toEqual(['ok', 'ok']);
    expect(new Set(observed.map((o) => o.actionId).filter(Boolean)).size).toBe(2);
    // ...and handed to the model in the order it asked.
    const results = toMessages(transcript)
      .filter((m) => m.role === 'tool')
      .map(
        (m) =>
          (m.content[0] as unknown as { toolName: string; output: { value: { output: unknown } } }).output.value.output,
      );
    expect(results).toEqual([{ noted: 'slow' }, { read: 1 }, { noted: 'fast' }]);
    expect([...effects.values()]).toEqual([1, 1]);
  });
});
