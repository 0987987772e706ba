/**
 * The child-run tests' shared pieces: a `boss` agent that hands jobs to a `kid` agent through an agent tool, the kid's
 * modes (each a way a child stops for a person, or naps), and what those tests read of runs: a run started on a
 * script, the children it listed, a snapshot of everything an operation refused must leave as it was, a run's spend.
 */
import { z } from 'zod';
import {
  defineAgent,
  defineAgentTool,
  defineReadTool,
  defineWaitTool,
  defineWriteTool,
  OutcomeUnknownError,
} from '../../src/index.js';
import type { Agent } from '../../src/core/agent.js';
import { buildSpec } from '../../src/producer/intake.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import { childRunsOf } from '../../src/runs/children.js';
import { readBudget } from '../../src/store/runRecord.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { until } from '../../testkit/until.js';
import { CrashPoints } from '../../src/config/testHooks.js';

export const OPERATOR_TOKEN = 'operator-token-for-tests';
export const small = { promptTokens: 50, completionTokens: 10 };
export const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled'];

export const kidInput = z.object({ id: z.string(), mode: z.enum(['flaky', 'ship', 'nap', 'pay', 'answer']) }).strict();
export type KidInput = z.infer<typeof kidInput>;

/** The invoices the kids' `pay` tool paid, in order (the service's own count: a duplicate is a number). */
export const payments: string[] = [];

/**
 * The kid at `version` (same tools, so the same tools hash, whatever the version). Its modes:
 *  - flaky: its first turn fails once (503); with MODEL_MAX_ATTEMPTS=1 and no outage window it parks needs_human;
 *  - ship: its write's outcome is unknown and cannot be reconciled: the action goes to the human queue;
 *  - pay: a write that waits for a person's approval under APPROVAL_RULES `[{tool: 'pay'}]`;
 *  - nap: it sleeps 4 s, then answers;
 *  - answer: it answers at once.
 */
export function kidAgent(version = 'kid@1'): Agent<KidInput> {
  return defineAgent<KidInput>({
    name: 'kid',
    version,
    input: kidInput,
    key: (i) => i.id,
    instructions: () => 'Do the job.',
    prompt: (i) => `job ${i.id}`,
    tools: [
      defineReadTool({
        name: 'noop',
        description: 'reads nothing',
        args: z.object({}),
        execute: async () => ({ ok: true }),
      }),
      defineWaitTool({
        name: 'nap',
        description: 'sleeps',
        args: z.object({}),
        wait: () => ({ kind: 'sleep', forMs: 4_000 }),
      }),
      defineWriteTool({
        name: 'ship',
        description: 'ships a parcel; its service cannot say whether it did',
        args: z.object({ parcel: z.string() }).strict(),
        service: { enforcesKey: true, reconcile: 'none' },
        dispatch: async () => {
          throw new OutcomeUnknownError('the service timed out');
        },
      }),
      defineWriteTool({
        name: 'pay',
        description: 'pays an invoice',
        args: z.object({ invoice: z.string() }).strict(),
        service: { enforcesKey: true, reconcile: 'none' },
        dispatch: async (args) => {
          payments.push(args.invoice);
          return { receipt: `paid-${args.invoice}`, output: { paid: true }, replayed: false };
        },
      }),
    ],
    demoScript: ({ id, mode }): unknown[] => {
      if (mode === 'flaky')
        return [
          { toolCalls: [{ name: 'noop' }], usage: small, transientFailures: 1 },
          { toolCalls: [{ name: 'noop' }], usage: small },
          { final: `kid ${id} done`, usage: small },
        ];
      if (mode === 'ship')
        return [
          { toolCalls: [{ name: 'ship', args: { parcel: id } }], usage: small },
          { final: 'shipped', usage: small },
        ];
      if (mode === 'pay')
        return [
          { toolCalls: [{ name: 'pay', args: { invoice: id } }], usage: small },
          { final: `kid ${id} paid`, usage: small },
        ];
      if (mode === 'answer') return [{ final: `kid ${id} answered`, usage: small }];
      return [
        { toolCalls: [{ name: 'nap' }], usage: small },
        { final: `kid ${id} woke`, usage: small },
      ];
    },
  });
}

export const kid = kidAgent();

/** Another agent a boss hands work to: it naps `forMs`, then answers (a sibling that keeps its parent waiting). */
export const sitter = defineAgent<{ id: string; forMs: number }>({
  name: 'sitter',
  version: 'sitter@1',
  input: z.object({ id: z.string(), forMs: z.number().int().positive() }).strict(),
  key: (i) => i.id,
  instructions: () => 'Wait.',
  prompt: (i) => `sit ${i.id}`,
  tools: [
    defineWaitTool({
      name: 'nap',
      description: 'sleeps',
      args: z.object({ forMs: z.number().int().positive() }),
      wait: (a) => ({ kind: 'sleep', forMs: a.forMs }),
    }),
  ],
  demoScript: ({ id, forMs }): unknown[] => [
    { toolCalls: [{ name: 'nap', args: { forMs } }], usage: small },
    { final: `sitter ${id} woke`, usage: small },
  ],
});

/**
 * The parent: `delegate` hands a job to a kid, `hand_to_sitter` to a sitter; `nap` sleeps a minute (the parent has
 * moved on and is busy).
 */
export const boss = defineAgent<{ id: string }>({
  name: 'boss',
  version: 'boss@1',
  input: z.object({ id: z.string() }).strict(),
  key: (i) => i.id,
  instructions: () => 'Delegate.',
  tools: [
    defineAgentTool({
      name: 'delegate',
      description: 'hands the job to a kid',
      args: kidInput,
      agent: 'kid',
      input: (a) => a,
    }),
    defineAgentTool({
      name: 'hand_to_sitter',
      description: 'hands a wait to a sitter',
      args: z.object({ id: z.string(), forMs: z.number().int().positive() }),
      agent: 'sitter',
      input: (a) => a,
    }),
    defineWaitTool({
      name: 'nap',
      description: 'sleeps',
      args: z.object({}),
      wait: () => ({ kind: 'sleep', forMs: 60_000 }),
    }),
  ],
});

export const delegate = (id: string, mode: KidInput['mode']) => ({ name: 'delegate', args: { id, mode } });
export const handToSitter = (id: string, forMs: number) => ({ name: 'hand_to_sitter', args: { id, forMs } });
export const bossNaps = { toolCalls: [{ name: 'nap', args: {} }], usage: small };

/** A run of `agent` on `turns`, created as the intake would; its run id. */
export async function startScripted(
  ctx: EngineContext,
  agent: string,
  input: unknown,
  turns: unknown[],
  budget: { maxSteps?: number; maxTokens?: number; maxWallMs?: number; maxCost?: number } = {},
): Promise<string> {
  const spec = buildSpec(
    ctx,
    { tenant: 'acme', agent, input, model: 'scripted', script: scriptSchema.parse(turns), budget },
    Date.now(),
  );
  await ctx.store.create(spec, Date.now());
  return spec.runId;
}

/** A boss run on `turns`, with a money budget (300,000 µ$) unless `budget` says otherwise. */
export function startBoss(
  ctx: EngineContext,
  id: string,
  turns: unknown[],
  budget: Parameters<typeof startScripted>[4] = {},
): Promise<string> {
  return startScripted(ctx, 'boss', { id }, turns, { maxTokens: 5_000_000, maxCost: 300_000, ...budget });
}

/** The `n` children `parent` listed, once it listed them all. */
export async function childrenOf(ctx: EngineContext, parent: string, n: number): Promise<string[]> {
  return until(`${n} children of ${parent}`, 10_000, async () => {
    const ids = await childRunsOf(ctx).childrenOf(parent);
    return ids.length === n && ids;
  });
}

/** Everything a refused operation must leave as it was: the run hash, the budget, the journal, the events, the jobs. */
export async function snapshot(ctx: EngineContext, runId: string) {
  const k = ctx.keys.run(runId);
  const jobs = await ctx.queues.forRun(runId).getJobs(['active', 'waiting', 'delayed', 'prioritized']);
  return {
    run: await ctx.redis.hgetall(k.run),
    budget: await ctx.redis.hgetall(k.budget),
    journal: await ctx.redis.llen(k.journal),
    events: await ctx.redis.xlen(k.events),
    jobs: jobs.filter((j) => j?.id?.startsWith(`${runId}.`)).map((j) => j.id),
  };
}

export const costOf = async (ctx: EngineContext, runId: string) =>
  (await readBudget(ctx.redis, ctx.keys, runId, ['costUsed'])).costUsed;

/** POST `body` to the API at `url` as the operator: the status and the JSON body. */
export async function post(
  url: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

/**
 * A crash point a test holds: while held, a parent's wake stops after it marked its children as taken and before its
 * commit (the attempt fails, and BullMQ tries the job again after its backoff); released, the next attempt commits.
 * Give `crash` to the workers that may run the parent's wake.
 */
export function wakeHold() {
  let holding = false;
  let hits = 0;
  const crash = new CrashPoints(['before_child_resume'], () => {
    if (!holding) return;
    hits++;
    throw new Error('held at before_child_resume');
  });
  return {
    crash,
    /** Holds the wakes from now on; resolves `held()`'s wait below once one was held. */
    hold(): { held: () => Promise<void> } {
      holding = true;
      const before = hits;
      return { held: () => until('a parent wake held', 10_000, async () => hits > before).then(() => undefined) };
    },
    release(): void {
      holding = false;
    },
  };
}
