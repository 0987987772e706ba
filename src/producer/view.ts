/** The run view served by GET /v1/runs/:id: status, cursor, budget, transcript, effects. */
import type { AppContext } from '../app/context.js';
import type { JournalEntry } from '../journal/entries.js';

export interface RunView {
  runId: string;
  tenant: string;
  ticketId: string;
  status: string;
  reason: string;
  step: number;
  agent: { model: string; agentVersion: string; toolsHash: string };
  budget: {
    limits: { maxSteps: number; maxTokens: number; maxWallMs: number; deadlineAt: string };
    used: { steps: number; tokens: number; wallMs: number };
  };
  transcript: JournalEntry[];
  effects: unknown[];
}

export type EffectsLister = (runId: string) => Promise<unknown[]>;

export async function runView(ctx: AppContext, runId: string, listEffects?: EffectsLister, nowMs = Date.now()): Promise<RunView | undefined> {
  const [spec, state] = await Promise.all([ctx.store.readSpec(runId), ctx.store.readState(runId)]);
  if (!spec || !state) return undefined;
  const finishedAt = Number((await ctx.redis.hget(ctx.keys.run(runId).run, 'finishedAt')) ?? 0);
  const [transcript, effects] = await Promise.all([ctx.store.transcript(runId), listEffects ? listEffects(runId) : Promise.resolve([])]);
  return {
    runId, tenant: spec.tenant, ticketId: spec.ticket.id, status: state.status, reason: state.reason, step: state.cursor,
    agent: { model: spec.model, agentVersion: spec.agentVersion, toolsHash: spec.toolsHash },
    budget: {
      limits: { ...spec.limits, deadlineAt: new Date(spec.limits.deadlineAt).toISOString() },
      used: { steps: state.used.steps, tokens: state.used.tokens, wallMs: (finishedAt || nowMs) - spec.createdAt },
    },
    transcript,
    effects,
  };
}
