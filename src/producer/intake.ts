/**
 * Starting a run of a named agent. The agent's key(input) names the run's
 * subject; the intake event (a webhook's event id, the Idempotency-Key header)
 * names the event. One run per event, by construction: the run id is derived
 * from (tenant, agent, subject, event), so the same event delivered twice is
 * the same run, and a new event on the subject is a new run, linked to the
 * subject's latest run by createRun (`previousRunId`). A request that names no
 * event is the subject's run: its latest run when it has one, else the run
 * derived from (tenant, agent, subject). The Idempotency-Key is also a
 * key -> run id record (24 h): the same key is the same run even with another
 * body. The input is validated by the agent's schema. Nothing is written for
 * an invalid request.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { TenantLineFull, type Admission } from '../flow/admission.js';
import { scriptedModelAllowed } from '../config/testHooks.js';
import { ConfigError, TerminalError } from '../core/errors.js';
import type { RunStatus } from '../core/status.js';
import { SearchFieldError, type Agent, type AgentCatalog, type SearchFields } from '../core/agent.js';
import { runSpecSchema, type RunSpec } from '../runs/spec.js';
import type { CreateRunResult } from '../store/calls/createRun.js';
import { runIdFor, runIdForEvent } from '../store/keys.js';
import { readRun } from '../store/runRecord.js';
import { resolveModelChoice } from './modelChoice.js';
import { normalizeRunRequest, type CreateRunRequest, type RunRequest } from './schemas.js';
import { runReplicated } from '../runs/replication.js';
import { fieldsOf } from './fieldErrors.js';
import { agentSafeParse } from '../core/agentCode.js';

export const REQUEST_KEY_TTL_MS = 24 * 3600_000;

/**
 * A field at fault. `deployment` says what the deployment is configured with (the agents it runs, the setting that
 * enables a provider, where a model choice came from): for the producer and operators, who run it, never for a
 * tenant.
 */
export interface FieldProblem {
  path: string;
  message: string;
  deployment?: string;
}

/** A create-run request that does not validate (a 400 naming the fields). */
export class InvalidRunRequest extends TerminalError {
  /** The fields at fault as anyone may see them. */
  readonly fields: { path: string; message: string }[];
  private readonly detailed: { path: string; message: string }[];
  constructor(problems: FieldProblem[]) {
    const fields = problems.map(({ path, message }) => ({ path, message }));
    super('invalid_input', `invalid request: ${fields.map((f) => `${f.path}: ${f.message}`).join('; ')}`);
    this.fields = fields;
    this.detailed = problems.map(({ path, message, deployment }) => ({
      path,
      message: deployment === undefined ? message : `${message} (${deployment})`,
    }));
  }

  /** The fields for a caller: with the deployment's configuration only where `seesDeployment` (producer, operators). */
  fieldsFor(seesDeployment: boolean): { path: string; message: string }[] {
    return seesDeployment ? this.detailed : this.fields;
  }
}

/** A request naming an agent this deployment does not run: which agents it runs is the deployment's to tell. */
export function unknownAgent(ctx: Pick<EngineContext, 'agents'>, agent: string, path: string): InvalidRunRequest {
  return new InvalidRunRequest([
    {
      path,
      message: `agent '${agent}' is not run by this deployment`,
      deployment: `it runs: ${ctx.agents.names.join(', ')}`,
    },
  ]);
}

/** A request read once: its one form, its agent, the input as that agent's schema accepts it, its subject and run. */
export interface ResolvedRequest {
  req: RunRequest;
  agent: Agent;
  input: unknown;
  key: string;
  runId: string;
}

/**
 * The request's agent and its input as that agent's schema accepts it; an InvalidRunRequest naming the field otherwise.
 */
export function resolveIntake(
  ctx: EngineContext,
  req: RunRequest,
  event?: string,
): { agent: Agent; input: unknown; key: string; runId: string } {
  const agent = ctx.agents.get(req.agent);
  if (!agent) throw unknownAgent(ctx, req.agent, req.fields.input === 'input' ? 'agent' : '(body)');
  const parsed = agentSafeParse(agent.input, req.input);
  if (!parsed.success) throw new InvalidRunRequest(fieldsOf(parsed.error, req.fields.input));
  const key = agent.key(parsed.data);
  const runId =
    event === undefined
      ? runIdFor(req.tenant, agent.name, key)
      : runIdForEvent(req.tenant, agent.name, key, event, ctx.keys.shards);
  return { agent, input: parsed.data, key, runId };
}

/**
 * A request resolved once (for intake paths that need its run id before they start it: webhooks record it first),
 * then started from this with specOf, without reading it again.
 */
export function resolveRequest(ctx: EngineContext, request: CreateRunRequest, event?: string): ResolvedRequest {
  const req = normalizeRunRequest(ctx.agents, request);
  return { req, ...resolveIntake(ctx, req, event) };
}

/**
 * The run spec of a request; `event` (already validated at the edge, and again by the spec schema) names the intake
 * event.
 */
export function buildSpec(ctx: EngineContext, request: CreateRunRequest, nowMs: number, event?: string): RunSpec {
  return specOf(ctx, resolveRequest(ctx, request, event), nowMs, event);
}

/** The run spec of a resolved request (see buildSpec). */
export function specOf(ctx: EngineContext, resolved: ResolvedRequest, nowMs: number, event?: string): RunSpec {
  const { cfg } = ctx;
  const { req, agent, input, key, runId } = resolved;
  const problems: FieldProblem[] = [];
  const maxSteps = req.budget?.maxSteps ?? cfg.DEFAULT_MAX_STEPS;
  const maxTokens = req.budget?.maxTokens ?? cfg.DEFAULT_MAX_TOKENS;
  const maxWallMs = req.budget?.maxWallMs ?? cfg.DEFAULT_MAX_WALL_MS;
  if (maxSteps > cfg.LIMIT_MAX_STEPS)
    problems.push({ path: 'budget.maxSteps', message: `at most ${cfg.LIMIT_MAX_STEPS}` });
  if (maxTokens > cfg.LIMIT_MAX_TOKENS)
    problems.push({ path: 'budget.maxTokens', message: `at most ${cfg.LIMIT_MAX_TOKENS}` });
  if (maxWallMs > cfg.LIMIT_MAX_WALL_MS)
    problems.push({ path: 'budget.maxWallMs', message: `at most ${cfg.LIMIT_MAX_WALL_MS}` });
  const maxCost = runMaxCost(req.budget?.maxCost, agent.budget?.maxCost, cfg, problems);
  // The model is chosen here, once, and pinned in the spec (src/producer/modelChoice.ts).
  const choice = resolveModelChoice(cfg, ctx.providers, agent, req.tenant, req.model, req.fields.model);
  if ('path' in choice) problems.push(choice);
  const model = 'path' in choice ? undefined : choice.provider;
  if (req.script && !scriptedModelAllowed(cfg))
    problems.push({
      path: req.fields.script,
      message: 'run-supplied scripts are refused',
      deployment: 'APP_MODE=production or SCRIPTED_MODEL_ENABLED=false',
    });
  else if (req.script && model !== undefined && model !== 'scripted')
    problems.push({ path: req.fields.script, message: 'only the scripted provider takes a script' });
  const search = searchOf(agent, input, problems);
  if (problems.length > 0 || 'path' in choice) throw new InvalidRunRequest(problems);
  const spec: RunSpec = {
    v: 2,
    runId,
    tenant: req.tenant,
    agent: agent.name,
    key,
    ...(event !== undefined ? { event } : {}),
    input,
    model: choice.provider,
    modelId: choice.model,
    ...(choice.options ? { modelOptions: choice.options } : {}),
    ...(req.script ? { script: req.script } : {}),
    agentVersion: agent.version,
    toolsHash: agent.tools.schemaHash,
    limits: { maxSteps, maxTokens, maxWallMs, deadlineAt: nowMs + maxWallMs, ...(maxCost ? { maxCost } : {}) },
    createdAt: nowMs,
    ...(req.priority ? { priority: req.priority } : {}),
    ...(Object.keys(search).length > 0 ? { search: { ...search } } : {}),
  };
  // The worker parses the stored spec with this schema: what it would refuse is refused here.
  const check = runSpecSchema.safeParse(JSON.parse(JSON.stringify(spec)));
  if (!check.success)
    throw new InvalidRunRequest(
      check.error.issues.map((i) => ({
        path: specFieldToRequest(i.path.map(String).join('.'), req),
        message: i.message,
      })),
    );
  return spec;
}

/** The agent's search fields of the input; a value out of bounds is a problem naming `search.<name>`. */
function searchOf(agent: Agent, input: unknown, problems: FieldProblem[]): SearchFields {
  try {
    return agent.search(input);
  } catch (err) {
    if (!(err instanceof SearchFieldError)) throw err;
    problems.push({ path: err.field, message: err.message });
    return {};
  }
}

/** A spec field named as the request field it comes from (`limits.maxWallMs` -> `budget.maxWallMs`). */
function specFieldToRequest(path: string, req: RunRequest): string {
  if (path.startsWith('limits.deadlineAt')) return 'budget.maxWallMs';
  if (path.startsWith('limits.')) return `budget.${path.slice('limits.'.length)}`;
  if (path.startsWith('script')) return req.fields.script + path.slice('script'.length);
  if (path.startsWith('input')) return req.fields.input + path.slice('input'.length);
  return path;
}

/**
 * @param idempotencyKey the API's Idempotency-Key: the event, and a key -> run record.
 * @param event the intake event (default: the Idempotency-Key); a webhook passes its event id.
 */
export async function startRun(
  ctx: EngineContext,
  req: CreateRunRequest,
  idempotencyKey: string | undefined,
  nowMs = Date.now(),
  event = idempotencyKey,
): Promise<StartedRun> {
  return startSpec(ctx, buildSpec(ctx, req, nowMs, event), idempotencyKey, nowMs);
}

export interface StartedRun {
  runId: string;
  created: boolean;
  previousRunId?: string;
}

/** What a request that found its run answers: that run, created by an earlier request. */
export interface FoundRun {
  runId: string;
  created: false;
  previousRunId?: string;
  status?: RunStatus;
}

/**
 * The answer to the same event again (a create's Idempotency-Key, a webhook's event id; or, with no event named, the
 * subject's latest run): the run, with its status (a dead run was settled, never left queued) and the run before it as
 * the first answer named it, read from the run record in one read: a request asked again because its answer was lost
 * learns what that answer said.
 */
export async function foundRun(ctx: EngineContext, runId: string): Promise<FoundRun> {
  const run = await readRun(ctx.redis, ctx.keys, runId, ['previousRunId']);
  return {
    runId,
    created: false,
    ...(run?.previousRunId ? { previousRunId: run.previousRunId } : {}),
    ...(run?.status ? { status: run.status } : {}),
  };
}

/** startRun of a spec built already (specOf); the Idempotency-Key as startRun takes it. */
export async function startSpec(
  ctx: EngineContext,
  spec: RunSpec,
  idempotencyKey: string | undefined,
  nowMs: number,
): Promise<StartedRun> {
  // Acknowledged means replicated, a run found as much as a run created: else NotReplicatedError (a 503 with
  // Retry-After). A run an earlier request created may still be only on this master (that request was told 503);
  // answering 200 for it before a replica has it would acknowledge what a failover can take. The wait covers every
  // write the master holds (src/store/replicated.ts), whichever process made it.
  let keyWritten: string | undefined;
  if (idempotencyKey) {
    const key = ctx.keys.requestKey(spec.tenant, idempotencyKey);
    const previous = await ctx.redis.set(key, spec.runId, 'PX', REQUEST_KEY_TTL_MS, 'NX', 'GET');
    if (previous && previous !== spec.runId) {
      if (await ctx.store.exists(previous)) {
        await runReplicated(ctx, previous, 'intake');
        return { runId: previous, created: false };
      }
      // The earlier request died before creating its run: this request's run takes the key.
      await ctx.redis.set(key, spec.runId, 'PX', REQUEST_KEY_TTL_MS);
    }
    if (previous !== spec.runId) keyWritten = key;
  }
  let intake: CreateRunResult;
  try {
    intake = await createAdmitted(ctx, spec, nowMs);
  } catch (err) {
    // Refused with nothing written: the key's record goes too (the same key again derives the same run id anyway).
    if (err instanceof TenantLineFull && keyWritten) await ctx.redis.del(keyWritten);
    throw err;
  }
  await runReplicated(ctx, intake.runId, 'intake');
  if (intake.outcome !== 'created') return { runId: intake.runId, created: false };
  return {
    runId: intake.runId,
    created: true,
    ...(intake.previousRunId ? { previousRunId: intake.previousRunId } : {}),
  };
}

/**
 * The run created, under flow control in its tenant's line: put in line first, then created with
 * its step 1 job delayed to its deadline (RunStore.intake), then whatever the limits allow admitted.
 * Another process may admit the run between the two: it finds no job yet, and the run is promoted here
 * once it exists. A process that dies in between leaves a line entry without a run (its slot given back
 * by the sweep past INTAKE_GRACE_MS) or a run in line (admitted in its turn); see src/flow/admission.ts.
 */
export async function createAdmitted(ctx: EngineContext, spec: RunSpec, nowMs: number): Promise<CreateRunResult> {
  const admission = ctx.admission?.enabled ? ctx.admission : undefined;
  if (!admission) return ctx.store.intake(spec, nowMs);
  const priority = await placeBehindPrevious(ctx, admission, spec);
  // A run from outside is refused past its tenant's waiting limit (TenantLineFull: nothing written); a child is not.
  const queued = await admission.enqueue(
    { runId: spec.runId, tenant: spec.tenant, agent: spec.agent, priority },
    nowMs,
    spec.parent === undefined,
  );
  const intake = await ctx.store.intake(spec, nowMs, true);
  if (intake.outcome !== 'created' && queued) await admission.withdraw(spec.runId);
  if (intake.outcome === 'created' && queued) await admission.created(spec.runId);
  else await admission.admit();
  return intake;
}

/**
 * The priority a run is placed in line at: a follow-up never goes ahead of its subject's previous run still waiting
 * in line, or it would be admitted first and wait for that run holding its slot (docs/flow-control.md); its place is
 * capped at the previous run's priority. Two runs of one subject created at the same instant are not ordered so.
 */
async function placeBehindPrevious(ctx: EngineContext, admission: Admission, spec: RunSpec): Promise<number> {
  const asked = spec.priority ?? 0;
  if (asked === 0) return 0;
  const previous = await ctx.redis.get(ctx.keys.subjectLatest(spec.tenant, spec.agent, spec.key));
  if (previous === null || previous === spec.runId) return asked;
  const waiting = await admission.waitingPriority(previous);
  return waiting === undefined ? asked : Math.min(asked, waiting);
}

/**
 * A run's money budget in µ$: the request's, else its agent's own default (`defineAgent({ budget: { maxCost } })`), else
 * DEFAULT_MAX_COST, else LIMIT_MAX_COST (0: none); a request above LIMIT_MAX_COST is refused naming budget.maxCost (an
 * agent's default above it stopped the boot: checkAgentBudgets).
 */
function runMaxCost(
  asked: number | undefined,
  agentDefault: number | undefined,
  cfg: { DEFAULT_MAX_COST: number; LIMIT_MAX_COST: number },
  problems: FieldProblem[],
): number {
  const limit = cfg.LIMIT_MAX_COST;
  if (asked !== undefined && limit > 0 && asked > limit)
    problems.push({ path: 'budget.maxCost', message: `at most ${limit} (µ$)` });
  return asked ?? agentDefault ?? (cfg.DEFAULT_MAX_COST || limit);
}

/**
 * Boot check: an agent's default maxCost is within this deployment's LIMIT_MAX_COST (when set), as DEFAULT_MAX_COST
 * is; a ConfigError naming the agent otherwise (every run of it would be over the fleet's ceiling).
 */
export function checkAgentBudgets(cfg: { LIMIT_MAX_COST: number }, agents: AgentCatalog): void {
  const limit = cfg.LIMIT_MAX_COST;
  if (limit <= 0) return;
  for (const agent of agents.all) {
    const own = agent.budget?.maxCost;
    if (own !== undefined && own > limit) {
      const field = `AGENTS_MODULE: agent '${agent.name}' budget.maxCost`;
      throw new ConfigError([field], `invalid configuration: ${field}: ${own} is above LIMIT_MAX_COST (${limit})`);
    }
  }
}
