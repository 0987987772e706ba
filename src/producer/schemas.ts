/**
 * Request bodies at the producer edge. POST /v1/runs takes either form:
 *
 *  - `{ tenant, agent: '<name>', input, budget?, model?, script? }`: a run of
 *    the named agent; `input` is validated by that agent's schema (in buildSpec);
 *  - `{ tenant, <field>, budget?, agent?: { model?, script? }, priority? }`: an
 *    agent's shorthand (its `intake.shorthand`: the first form with that agent and
 *    input = the field), for producers that predate named agents.
 *
 * The stored run spec is the engine's: src/runs/spec.ts.
 */
import { z } from 'zod';
import type { AgentCatalog } from '../core/agent.js';
import { AGENT_NAME_FORMAT } from '../core/agentName.js';
import { tenantNameSchema } from '../core/tenant.js';
import { scriptSchema } from '../models/scriptedTurns.js';
import { maxCostSchema, maxStepsSchema, maxTokensSchema, maxWallMsSchema, providerNameSchema } from '../runs/spec.js';

/** A run's priority within its tenant's line (flow control): 0 normal (the default) to 4 most urgent. */
export const prioritySchema = z.number().int().min(0).max(4);

export const budgetRequestSchema = z
  .object({
    maxSteps: maxStepsSchema,
    maxTokens: maxTokensSchema,
    maxWallMs: maxWallMsSchema,
    maxCost: maxCostSchema.meta({
      description:
        "The run's money budget in µ$ (1e-6 USD), a whole number: an attempt that could cross it is not made (the run " +
        "stops budget_exceeded). Default: the agent's own, else DEFAULT_MAX_COST; at most LIMIT_MAX_COST.",
    }),
  })
  .partial()
  .strict();

/** An agent's name as agents are defined (AGENT_NAME_FORMAT); the message leaves the sender's text out. */
export const agentNameSchema = z
  .string()
  .regex(AGENT_NAME_FORMAT, 'an agent name: a-z, then up to 62 of a-z, 0-9, _ or -');

/** A tenant as every intake names it: it is part of the keys the run and its events are stored under. */
export const tenantSchema = tenantNameSchema('tenant must be 1-63 letters, digits, _ or -');

/** A run of a named agent. */
export const agentRunSchema = z
  .object({
    tenant: tenantSchema,
    agent: agentNameSchema,
    input: z.unknown(),
    budget: budgetRequestSchema.optional(),
    model: providerNameSchema.optional(),
    script: scriptSchema.optional(),
    priority: prioritySchema.optional(),
  })
  .strict();

/** The request options an agent's shorthand body takes besides its input field (`agent` holds model and script). */
const shorthandOptions = {
  tenant: tenantSchema,
  budget: budgetRequestSchema.optional(),
  agent: z.object({ model: providerNameSchema.optional(), script: scriptSchema.optional() }).strict().optional(),
  priority: prioritySchema.optional(),
};

/**
 * An agent's shorthand body (its `intake.shorthand`): `{ tenant, <field>: input, ... }`. The input is validated by
 * the agent's schema at intake, errors named under the field.
 */
export function shorthandRunSchema(field: string) {
  let schema = shorthandSchemas.get(field);
  if (!schema) {
    schema = shorthandSchemaOf(field);
    shorthandSchemas.set(field, schema);
  }
  return schema;
}

const shorthandSchemaOf = (field: string) =>
  z.object({ ...shorthandOptions, [field]: z.unknown().refine((v) => v !== undefined, 'Required') }).strict();

/**
 * One schema per field, built once: zod compiles a schema's parser on its first parses, so a schema built per request
 * paid that compilation on every shorthand request.
 */
const shorthandSchemas = new Map<string, ReturnType<typeof shorthandSchemaOf>>();

export type AgentRunRequest = z.infer<typeof agentRunSchema>;
/** A shorthand body: the options, and the input under the agent's field. */
export interface ShorthandRunRequest {
  tenant: string;
  budget?: z.infer<typeof budgetRequestSchema> | undefined;
  agent?: { model?: string | undefined; script?: z.infer<typeof scriptSchema> | undefined } | undefined;
  priority?: number | undefined;
  [field: string]: unknown;
}
export type CreateRunRequest = AgentRunRequest | ShorthandRunRequest;

/**
 * The schema a body is read with: the named-agent form when `agent` is a string; else the shorthand of the first
 * agent whose field the body has; else the named-agent form (its errors say what a body needs).
 */
export function createRunSchemaFor(agents: AgentCatalog, body: unknown): z.ZodType<CreateRunRequest> {
  const fields = typeof body === 'object' && body !== null ? body : {};
  if (typeof (fields as { agent?: unknown }).agent === 'string') return agentRunSchema;
  const field = agents.shorthandFields.find((f) => Object.hasOwn(fields, f));
  return field === undefined ? agentRunSchema : shorthandRunSchema(field);
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

/** A request in the named-agent form; a shorthand body names its agent by its field (`agents` knows which). */
export function normalizeRunRequest(agents: AgentCatalog, req: CreateRunRequest): RunRequest {
  if (typeof req.agent === 'string') return { ...(req as AgentRunRequest), fields: NAMED_FIELDS };
  const short = req as ShorthandRunRequest;
  const field = agents.shorthandFields.find((f) => Object.hasOwn(short, f));
  return {
    tenant: short.tenant,
    // No agent claims the body's fields: the intake refuses the unknown agent, naming `agent`.
    agent: field === undefined ? '' : agents.shorthand(field)!.name,
    input: field === undefined ? undefined : short[field],
    budget: short.budget,
    model: short.agent?.model,
    script: short.agent?.script,
    priority: short.priority,
    fields: { input: field ?? 'input', model: 'agent.model', script: 'agent.script' },
  };
}

const NAMED_FIELDS = { input: 'input', model: 'model', script: 'script' };
