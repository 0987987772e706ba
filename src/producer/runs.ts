/**
 * Starting a run: idempotent on (tenant, ticket.id) by construction (the run
 * id is derived from them) and on the Idempotency-Key header (a key -> run id
 * record, kept 24 h). Nothing is written for an invalid request.
 */
import type { AppContext } from '../bin/context.js';
import { scriptedModelAllowed } from '../config/testHooks.js';
import { AGENT_VERSION } from '../agents/support/tools/index.js';
import { TerminalError } from '../core/errors.js';
import { runIdFor } from '../store/keys.js';
import { runSpecSchema, type CreateRunRequest, type RunSpec } from './schemas.js';

export const REQUEST_KEY_TTL_MS = 24 * 3600_000;

/** A create-run request that does not validate (a 400 naming the fields). */
export class InvalidRunRequest extends TerminalError {
  constructor(readonly fields: { path: string; message: string }[]) {
    super('invalid_input', `invalid request: ${fields.map((f) => `${f.path}: ${f.message}`).join('; ')}`);
  }
}

export function buildSpec(ctx: AppContext, req: CreateRunRequest, nowMs: number): RunSpec {
  const { cfg } = ctx;
  const problems: { path: string; message: string }[] = [];
  const maxSteps = req.budget?.maxSteps ?? cfg.DEFAULT_MAX_STEPS;
  const maxTokens = req.budget?.maxTokens ?? cfg.DEFAULT_MAX_TOKENS;
  const maxWallMs = req.budget?.maxWallMs ?? cfg.DEFAULT_MAX_WALL_MS;
  if (maxSteps > cfg.LIMIT_MAX_STEPS) problems.push({ path: 'budget.maxSteps', message: `at most ${cfg.LIMIT_MAX_STEPS}` });
  if (maxTokens > cfg.LIMIT_MAX_TOKENS) problems.push({ path: 'budget.maxTokens', message: `at most ${cfg.LIMIT_MAX_TOKENS}` });
  if (maxWallMs > cfg.LIMIT_MAX_WALL_MS) problems.push({ path: 'budget.maxWallMs', message: `at most ${cfg.LIMIT_MAX_WALL_MS}` });
  const model = req.agent?.model ?? cfg.MODEL_PROVIDER;
  if (!ctx.providers.has(model)) problems.push({ path: 'agent.model', message: `provider '${model}' is not enabled` });
  if (req.agent?.script && !scriptedModelAllowed(cfg)) problems.push({ path: 'agent.script', message: 'run-supplied scripts are refused (APP_MODE=production or SCRIPTED_MODEL_ENABLED=false)' });
  else if (req.agent?.script && model !== 'scripted') problems.push({ path: 'agent.script', message: 'only the scripted provider takes a script' });
  if (problems.length > 0) throw new InvalidRunRequest(problems);
  const runId = runIdFor(req.tenant, req.ticket.id);
  const spec: RunSpec = {
    v: 1, runId, tenant: req.tenant, ticket: req.ticket, model,
    ...(req.agent?.script ? { script: req.agent.script } : {}),
    agentVersion: AGENT_VERSION, toolsHash: ctx.registry.schemaHash,
    limits: { maxSteps, maxTokens, maxWallMs, deadlineAt: nowMs + maxWallMs },
    createdAt: nowMs,
  };
  // The worker parses the stored spec with this schema: what it would refuse is refused here.
  const check = runSpecSchema.safeParse(JSON.parse(JSON.stringify(spec)));
  if (!check.success) throw new InvalidRunRequest(check.error.issues.map((i) => ({ path: specFieldToRequest(i.path.map(String).join('.')), message: i.message })));
  return spec;
}

/** A spec field named as the request field it comes from (`limits.maxWallMs` -> `budget.maxWallMs`). */
function specFieldToRequest(path: string): string {
  if (path.startsWith('limits.deadlineAt')) return 'budget.maxWallMs';
  if (path.startsWith('limits.')) return `budget.${path.slice('limits.'.length)}`;
  if (path.startsWith('script')) return `agent.${path}`;
  return path;
}

export async function startRun(
  ctx: AppContext, req: CreateRunRequest, idempotencyKey: string | undefined, nowMs = Date.now(),
): Promise<{ runId: string; created: boolean }> {
  const spec = buildSpec(ctx, req, nowMs);
  if (idempotencyKey) {
    const key = ctx.keys.requestKey(req.tenant, idempotencyKey);
    const previous = (await ctx.redis.set(key, spec.runId, 'PX', REQUEST_KEY_TTL_MS, 'NX', 'GET')) as string | null;
    if (previous && previous !== spec.runId) {
      if (await ctx.store.exists(previous)) return { runId: previous, created: false };
      // The earlier request died before creating its run: this request's run takes the key.
      await ctx.redis.set(key, spec.runId, 'PX', REQUEST_KEY_TTL_MS);
    }
  }
  const created = await ctx.store.create(spec, nowMs);
  return { runId: spec.runId, created };
}
