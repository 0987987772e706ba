/**
 * Parallel tool calls on real Redis with a real worker: three reads of one step each wait until all three have
 * started (calls run one after another would never get there), and writes of one turn each go through the ledger with
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
import { until } from '../../testkit/until.js';

/** Calls that have started and ended, by label: a call may wait for others (a barrier, not a clock). */
const started = new Set<string>();
const ended = new Set<string>();
const barrier = z.object({
  label: z.string(),
  startedAll: z.array(z.string()).default([]),
  endedAll: z.array(z.string()).default([]),
});
async function pass({ label, startedAll, endedAll }: z.infer<typeof barrier>): Promise<void> {
  started.add(label);
  await until(
    `${label}: ${[...startedAll, ...endedAll].join(', ')}`,
    10_000,
    () => startedAll.every((l) => started.has(l)) && endedAll.every((l) => ended.has(l)),
  );
}
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
      args: barrier,
      execute: async (a) => (await pass(a), ended.add(a.label), { read: a.label }),
    }),
    defineWriteTool({
      name: 'note',
      description: 'notes',
      args: barrier.extend({ text: z.string() }),
      service: { enforcesKey: true, reconcile: 'none' },
      async dispatch({ text, ...a }, _ctx, req) {
        await pass(a);
        effects.set(req.idempotencyKey, (effects.get(req.idempotencyKey) ?? 0) + 1);
        ended.add(a.label);
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

describe('parallel tool calls', () => {
  it('the three reads of a step run at once: each waits until all three have started', async () => {
    const labels = ['P1-a', 'P1-b', 'P1-c'];
    const reads = labels.map((label) => ({ name: 'slow_read', args: { label, startedAll: labels } }));
    const runId = await start('P-1', [{ toolCalls: reads, usage }, done]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    const observed = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');
    expect(observed.map((o) => o.status)).toEqual(['ok', 'ok', 'ok']);
  });

  it('writes of one turn run at once, one effect each at the service; results reach the model in its order', async () => {
    // The first write asked ends only once the two calls after it have: they ran beside it, not after it.
    const calls = [
      { name: 'note', args: { text: 'slow', label: 'P2-slow', endedAll: ['P2-read', 'P2-fast'] } },
      { name: 'slow_read', args: { label: 'P2-read' } },
      { name: 'note', args: { text: 'fast', label: 'P2-fast' } },
    ];
    const runId = await start('P-2', [{ toolCalls: calls, usage }, done]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
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
    expect(results).toEqual([{ noted: 'slow' }, { read: 'P2-read' }, { noted: 'fast' }]);
    expect([...effects.values()]).toEqual([1, 1]);
  });
});
