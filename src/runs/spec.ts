/**
 * The run spec (immutable, stored once in the run hash field `spec`, cached by
 * workers) and the step job's data: the engine's durable records of a run,
 * validated whenever they are read back. The run's input is `unknown` here:
 * the agent's schema validated it at intake, and only the agent reads it.
 */
import { z } from 'zod';
import { SEARCH_FIELD_NAME_FORMAT, SEARCH_VALUE_MAX_CHARS } from '../core/agent.js';
import { AGENT_NAME_FORMAT } from '../core/agentName.js';
import { modelIdSchema, modelOptionsSchema, providerNameSchema } from '../core/model.js';
import { HARD_LIMITS } from '../core/limits.js';
import { PackedSpecUnreadable } from '../store/runRecord.js';

/** The budget numbers, bounded (src/core/limits.ts): the request and the stored spec share them. */
export const maxStepsSchema = z.number().int().positive().max(HARD_LIMITS.maxSteps);
export const maxTokensSchema = z.number().int().positive().max(HARD_LIMITS.maxTokens);
export const maxWallMsSchema = z.number().int().positive().max(HARD_LIMITS.maxWallMs);
/** A run's money budget: integer µ$ (1e-6 USD), e.g. 250000 = $0.25. */
export const maxCostSchema = z.number().int().positive().max(HARD_LIMITS.maxCost);

/** A run's limits: in its spec as created, in a step job's data once an operator's retry extended them. */
export const limitsSchema = z.object({
  maxSteps: maxStepsSchema,
  maxTokens: maxTokensSchema,
  maxWallMs: maxWallMsSchema,
  deadlineAt: z.number().int().nonnegative(),
  /** µ$; absent: no money budget for the run (the tenant's, agent's and fleet's still hold). */
  maxCost: maxCostSchema.optional(),
});
export type RunLimits = z.infer<typeof limitsSchema>;

/**
 * The budget hash's fields that hold a run's limits once a retry extended them: every key of limitsSchema (a unit test
 * holds the two equal, so a limit added to one is not left out of the jobs a resume or a sweep makes from the other).
 */
export const LIMIT_FIELDS = [
  'maxSteps',
  'maxTokens',
  'maxWallMs',
  'deadlineAt',
  'maxCost',
] as const satisfies readonly (keyof RunLimits)[];

/** A run's limits from its budget hash's fields (LIMIT_FIELDS); a maxCost of 0 is a run without a money budget. */
export function limitsOfBudget(budget: Readonly<Record<(typeof LIMIT_FIELDS)[number], number>>): RunLimits {
  const { maxCost, ...rest } = budget;
  return { ...rest, ...(maxCost > 0 ? { maxCost } : {}) };
}

/**
 * An intake event's key (a webhook's event id, an Idempotency-Key): 1 to 200 visible ASCII
 * characters, no spaces (it names a run by digest, and is shown to operators).
 */
export const EVENT_KEY_FORMAT = /^[\x21-\x7e]{1,200}$/;
export const eventKeySchema = z.string().regex(EVENT_KEY_FORMAT, '1 to 200 visible ASCII characters, no spaces');

/** A model provider's name (the worker's provider map decides whether it exists). */
export { providerNameSchema };

/**
 * v2: the run names its agent (`agent`, `agentVersion`, `toolsHash` pinned),
 * its intake key and its input. A v1 spec (before agents were named) does
 * not parse: such a run ends `failed` with `invalid_spec`, loudly.
 */
export const runSpecSchema = z.object({
  v: z.literal(2),
  runId: z.string(),
  tenant: z.string(),
  agent: z.string().regex(AGENT_NAME_FORMAT),
  /**
   * The subject key (agent.key(input)): the runs of one tenant, agent and subject form a
   * chain, each linked to the one before (`previousRunId`). Without `event`, the same
   * subject is the same run.
   */
  key: z.string(),
  /** The intake event's key (a webhook's event id, the Idempotency-Key): one run per event of a subject. */
  event: eventKeySchema.optional(),
  /** The subject's run before this one, linked by createRun when this run was created (the script writes it). */
  previousRunId: z
    .string()
    .regex(/^r_[0-9a-f]{24}$/)
    .optional(),
  input: z.unknown(),
  /** The pinned model choice: the provider's name (here, for runs pinned before model ids were)... */
  model: providerNameSchema,
  /**
   * ...the provider's model id and the sampling options, resolved at intake
   * (src/producer/modelChoice.ts). A spec without modelId (written before
   * model choices were pinned) runs on the provider's default model, as it
   * did then: read as it is, not migrated.
   */
  modelId: modelIdSchema.optional(),
  modelOptions: modelOptionsSchema.optional(),
  /** The scripted provider's turns for this run (validated by that provider). */
  script: z.unknown().optional(),
  agentVersion: z.string(),
  toolsHash: z.string(),
  limits: limitsSchema,
  createdAt: z.number().int(),
  /**
   * The run that started this one through an agent tool (src/runs/children.ts): its run id, and the step and call
   * that asked. A child ends `cancelled` when it finds its parent ended or gone.
   */
  parent: z
    .object({
      runId: z.string().regex(/^r_[0-9a-f]{24}$/),
      step: z.number().int().positive(),
      callId: z.string(),
    })
    .strict()
    .optional(),
  /**
   * The agent's search fields of the input (Agent.search), computed at intake: the run is indexed under each
   * (src/runs/search.ts), and every reader sees the same values.
   */
  search: z
    .record(z.string().regex(SEARCH_FIELD_NAME_FORMAT), z.string().min(1).max(SEARCH_VALUE_MAX_CHARS))
    .optional(),
  /** Its place in its tenant's line under flow control: 0 (normal) to 4 (most urgent); src/flow/admission.ts. */
  priority: z.number().int().min(0).max(4).optional(),
});
export type RunSpec = z.infer<typeof runSpecSchema>;

const tokenTotal = z.number().nonnegative().refine(Number.isInteger, 'must be a non-negative integer');

/** Job data of a step job, validated when it leaves the queue. */
export const stepJobDataSchema = z.object({
  v: z.literal(1),
  runId: z.string(),
  step: z.number().int().positive(),
  /** Set on the job that resumes a parked run: the step's state is read, never assumed. */
  resume: z.boolean().optional(),
  /** Set on a parked wait's wake job (src/runs/waits.ts): the run's wait is read and settled before the step. */
  wake: z.boolean().optional(),
  /**
   * The run's limits when an operator's retry extended them (src/runs/retryRun.ts; the budget hash
   * holds the same): they replace the spec's, and each commit hands them to the next step's job.
   */
  limits: limitsSchema.optional(),
  /** Epoch ms of the first model failure of a provider outage this step is waiting out (src/worker/step/waits.ts). */
  outageSince: z.number().int().nonnegative().optional(),
  /**
   * Budget usage as of the commit that created this job (fast path; re-read on any doubt).
   * Token totals are sums of validated usages and may pass 2^53 (a large-but-valid spend):
   * any non-negative integer, so such a total never makes a step job unreadable.
   */
  used: z.object({
    steps: z.number().int().nonnegative(),
    tokens: tokenTotal,
    /**
     * UTF-8 bytes of the transcript's decisions and observations (an upper bound on their tokens:
     * src/budget/policy.ts). Absent in a job written before it existed: the step then counts exactly.
     */
    contextBytes: tokenTotal.optional(),
    /** µ$ the run's model attempts cost; absent in a job written before it existed or for a run that cost nothing. */
    cost: tokenTotal.optional(),
  }),
});
export type StepJobData = z.infer<typeof stepJobDataSchema>;

/**
 * stepJobDataSchema.safeParse, with the data of a job a commit made (`{v, runId, step, used}`, the data of nearly
 * every step) checked by hand first: the same checks, and the object itself when they pass (it has no other field
 * to strip), without zod's walk of it at every step. Anything else (limits, a resume, a wake, an outage, an unknown
 * field, a bad value) goes through the schema, which strips what it does not know and names a bad field.
 */
export function safeParseStepJobData(raw: unknown): ReturnType<typeof stepJobDataSchema.safeParse> {
  const common = commonStepJobData(raw);
  return common ? { success: true, data: common } : stepJobDataSchema.safeParse(raw);
}

function commonStepJobData(raw: unknown): StepJobData | undefined {
  if (!isRecord(raw) || raw.v !== 1 || typeof raw.runId !== 'string' || !isSafeCount(raw.step) || raw.step === 0)
    return undefined;
  const { used } = raw;
  if (fieldCount(raw) !== 4 || !isRecord(used) || !isSafeCount(used.steps) || !isTotal(used.tokens)) return undefined;
  const optional = (used.contextBytes === undefined ? 0 : 1) + (used.cost === undefined ? 0 : 1);
  if (fieldCount(used) !== 2 + optional) return undefined;
  if (used.contextBytes !== undefined && !isTotal(used.contextBytes)) return undefined;
  if (used.cost !== undefined && !isTotal(used.cost)) return undefined;
  return raw as StepJobData;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** z.number().int().nonnegative(): a safe integer >= 0. */
const isSafeCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
/** tokenTotal: a finite integer >= 0, past 2^53 too. */
const isTotal = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

function fieldCount(o: object): number {
  let n = 0;
  for (const key in o) if (Object.hasOwn(o, key)) n++;
  return n;
}

/** The first invalid field's path (`used.tokens`), never its value. */
export function fieldOf(err: z.ZodError): string {
  const path = err.issues[0]?.path.map(String).join('.') ?? '';
  return /^[\w.]{1,80}$/.test(path) ? path : '(root)';
}

/**
 * Where a stored spec that could not be read fails to read (`json`: not JSON; `packed`: its packed form does not
 * inflate; else the first field the schema refuses), or undefined when `err` is no such failure (Redis, a bug).
 * Every reader of a stored spec answers a spec no retry can make readable with this field: the step ends its run
 * `invalid_spec: <field>`, an operator's request is 409 `invalid_spec`, the sweep hands its actions to a person.
 */
export function unreadableSpecField(err: unknown): string | undefined {
  if (err instanceof SyntaxError) return 'json';
  if (err instanceof z.ZodError) return fieldOf(err);
  if (err instanceof PackedSpecUnreadable) return err.field;
  return undefined;
}
