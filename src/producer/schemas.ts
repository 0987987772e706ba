/** Request bodies at the producer edge, and the run spec stored with each run. */
import { z } from 'zod';
import { scriptSchema } from '../models/script.js';
import { BUDGET_BOUNDS } from '../runs/bounds.js';

/** The budget numbers, bounded (src/runs/bounds.ts): the request and the stored spec share them. */
const maxSteps = z.number().int().positive().max(BUDGET_BOUNDS.maxSteps);
const maxTokens = z.number().int().positive().max(BUDGET_BOUNDS.maxTokens);
const maxWallMs = z.number().int().positive().max(BUDGET_BOUNDS.maxWallMs);

/** Strict at every level: an unknown field is a 400 naming it, never silently dropped. */
export const ticketSchema = z.object({
  id: z.string().min(1).max(200),
  subject: z.string().min(1).max(1000),
  body: z.string().max(200_000),
  customer: z.object({
    email: z.string().email(),
    name: z.string().min(1).max(200),
  }).strict(),
}).strict();
export type Ticket = z.infer<typeof ticketSchema>;

export const budgetRequestSchema = z
  .object({ maxSteps, maxTokens, maxWallMs })
  .partial()
  .strict();

export const agentSchema = z
  .object({
    model: z.enum(['scripted', 'openai']).optional(),
    script: scriptSchema.optional(),
  })
  .strict();

export const createRunSchema = z
  .object({
    tenant: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/i, 'tenant must be 1-63 letters, digits, _ or -'),
    ticket: ticketSchema,
    budget: budgetRequestSchema.optional(),
    agent: agentSchema.optional(),
  })
  .strict();
export type CreateRunRequest = z.infer<typeof createRunSchema>;

/** Immutable part of a run, stored once (run hash field `spec`) and cached by workers. */
export const runSpecSchema = z.object({
  v: z.literal(1),
  runId: z.string(),
  tenant: z.string(),
  ticket: ticketSchema,
  model: z.enum(['scripted', 'openai']),
  script: scriptSchema.optional(),
  agentVersion: z.string(),
  toolsHash: z.string(),
  limits: z.object({ maxSteps, maxTokens, maxWallMs, deadlineAt: z.number().int().nonnegative() }),
  createdAt: z.number().int(),
});
export type RunSpec = z.infer<typeof runSpecSchema>;

/** The run's input as the engine sees it (today the support ticket): tools and model requests get it as `unknown`. */
export function runInput(spec: RunSpec): unknown {
  return spec.ticket;
}

const tokenTotal = z.number().nonnegative().refine(Number.isInteger, 'must be a non-negative integer');

/** Job data of a step job, validated when it leaves the queue. */
export const stepJobDataSchema = z.object({
  v: z.literal(1),
  runId: z.string(),
  step: z.number().int().positive(),
  /** Set on the job that resumes a parked run: the step's state is read, never assumed. */
  resume: z.boolean().optional(),
  /**
   * Budget usage as of the commit that created this job (fast path; re-read on any doubt).
   * Token totals are sums of validated usages and may pass 2^53 (a large-but-valid spend):
   * any non-negative integer, so such a total never makes a step job unreadable.
   */
  used: z.object({
    steps: z.number().int().nonnegative(),
    tokens: tokenTotal,
    contextTokens: tokenTotal,
  }),
});
export type StepJobData = z.infer<typeof stepJobDataSchema>;

