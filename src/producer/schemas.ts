/**
 * Request bodies at the producer edge. POST /v1/runs takes either form:
 *
 *  - `{ tenant, agent: '<name>', input, budget?, model?, script? }`: a run of
 *    the named agent; `input` is validated by that agent's schema (in buildSpec);
 *  - `{ tenant, ticket, budget?, agent?: { model?, script? } }`: the support
 *    agent's shorthand (the first form with agent 'support' and input = ticket),
 *    kept for existing producers and the ticket webhooks.
 *
 * The stored run spec is the engine's: src/runs/spec.ts.
 */
import { z } from 'zod';
import { scriptSchema } from '../models/scriptedTurns.js';
import { maxStepsSchema, maxTokensSchema, maxWallMsSchema, providerNameSchema } from '../runs/spec.js';

/** A run's priority within its tenant's line (flow control): 0 normal (the default) to 4 most urgent. */
export const prioritySchema = z.number().int().min(0).max(4);

export const budgetRequestSchema = z
  .object({ maxSteps: maxStepsSchema, maxTokens: maxTokensSchema, maxWallMs: maxWallMsSchema })
  .partial()
  .strict();

const tenantSchema = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/i, 'tenant must be 1-63 letters, digits, _ or -');

/** A run of a named agent. */
export const agentRunSchema = z
  .object({
    tenant: tenantSchema,
    agent: z.string().min(1).max(63),
    input: z.unknown(),
    budget: budgetRequestSchema.optional(),
    model: providerNameSchema.optional(),
    script: scriptSchema.optional(),
    priority: prioritySchema.optional(),
  })
  .strict();

/** The agent the shorthand body runs. */
export const SHORTHAND_AGENT = 'support';

/** The support agent's shorthand: `ticket` is its input (validated by the agent's schema, errors named under `ticket`). */
export const ticketRunSchema = z
  .object({
    tenant: tenantSchema,
    ticket: z.unknown().refine((v) => v !== undefined, 'Required'),
    budget: budgetRequestSchema.optional(),
    agent: z.object({ model: providerNameSchema.optional(), script: scriptSchema.optional() }).strict().optional(),
    priority: prioritySchema.optional(),
  })
  .strict();

export type AgentRunRequest = z.infer<typeof agentRunSchema>;
export type TicketRunRequest = z.infer<typeof ticketRunSchema>;
export type CreateRunRequest = AgentRunRequest | TicketRunRequest;

/** The schema a body is read with: the named-agent form when `agent` is a string, else the shorthand. */
export function createRunSchemaFor(body: unknown): typeof agentRunSchema | typeof ticketRunSchema {
  return typeof (body as { agent?: unknown } | null)?.agent === 'string' ? agentRunSchema : ticketRunSchema;
}

/** A create request in one form, with the request field each part came from (errors name those). */
export interface RunRequest {
  tenant: string;
  agent: string;
  input: unknown;
  budget?: z.infer<typeof budgetRequestSchema> | undefined;
  model?: string | undefined;
  script?: z.infer<typeof scriptSchema> | undefined;
  priority?: number | undefined;
  fields: { input: string; model: string; script: string };
}

export function normalizeRunRequest(req: CreateRunRequest): RunRequest {
  if ('ticket' in req) {
    return {
      tenant: req.tenant,
      agent: SHORTHAND_AGENT,
      input: req.ticket,
      budget: req.budget,
      model: req.agent?.model,
      script: req.agent?.script,
      priority: req.priority,
      fields: { input: 'ticket', model: 'agent.model', script: 'agent.script' },
    };
  }
  return { ...req, fields: { input: 'input', model: 'model', script: 'script' } };
}
