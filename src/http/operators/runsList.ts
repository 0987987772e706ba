/**
 * GET /v1/runs?status=&tenant=&agent=&since=&until=&cursor=&limit=: runs, newest status change first (since/until:
 * the last status change in [since, until), epoch ms or ISO 8601), from the listing indexes (src/runs/list.ts). With
 * `subject=`, `customer=` or `field.<name>=` (every one given must match): a search, newest created first, from the
 * search indexes (src/runs/search.ts; `since`/`until` are refused with it). Either way, with ARCHIVE_URL set, the
 * archive's runs Redis let go are merged in (a run Redis still holds is listed once, as it stands in Redis). Any
 * principal that may read runs may list them, each seeing only what it may read: an operator scoped to tenants and
 * a tenant token list their own tenants' runs (a filter naming another tenant lists nothing). `nextCursor` continues
 * the walk; a malformed query is 400 naming the field.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { listEverywhere, decodeCursor, type RunPage } from '../../runs/list.js';
import {
  authUnconfigured,
  principalFor,
  RUN_TOKEN_SETTINGS,
  runTokensConfigured,
  type Principal,
  type SessionReader,
} from '../auth.js';
import { RUN_STATUSES } from '../../core/status.js';
import { invalid } from '../../producer/fieldErrors.js';
import { agentNameSchema } from '../../producer/schemas.js';
import { searchEverywhere, type SearchQuery, type SearchTerm } from '../../runs/search.js';
import { SEARCH_SUBJECT } from '../../store/keys.js';
import { SEARCH_FIELD_NAME_FORMAT, SEARCH_VALUE_MAX_CHARS } from '../../core/agent.js';
import { tenantNameSchema } from '../../core/tenant.js';

/**
 * A time bound of the listing: epoch ms, or an ISO 8601 date-time; one without a zone
 * (what a browser's datetime-local field sends) is read as UTC.
 */
function timeSchema(field: string) {
  return z
    .string()
    .max(40)
    .transform((raw, c) => {
      const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(raw) ? `${raw}Z` : raw;
      const ms = /^\d{1,15}$/.test(raw) ? Number(raw) : /^\d{4}-\d{2}-\d{2}T/.test(raw) ? Date.parse(iso) : NaN;
      if (!Number.isFinite(ms)) {
        c.addIssue({ code: 'custom', message: `${field}: epoch ms or an ISO 8601 date-time (e.g. 2026-12-03T14:00Z)` });
        return z.NEVER;
      }
      return ms;
    });
}

/** A `field.<name>` query parameter's name. */
const SEARCH_PARAM_FORMAT = new RegExp(`^field\\.${SEARCH_FIELD_NAME_FORMAT.source.slice(1)}`);

/** A search value: what an agent's search field or a subject key can be (SEARCH_VALUE_MAX_CHARS). */
const searchValue = (field: string) =>
  z
    .string()
    .min(1, `${field}: 1 to ${SEARCH_VALUE_MAX_CHARS} characters`)
    .max(SEARCH_VALUE_MAX_CHARS, `${field}: 1 to ${SEARCH_VALUE_MAX_CHARS} characters`);

export const runListQuerySchema = z
  .object({
    /** Runs of this subject key (agent.key(input), e.g. a ticket id), from the search indexes. */
    subject: searchValue('subject')
      .optional()
      .meta({ description: "Runs of this subject key (the agent's key(input), e.g. a ticket id)." }),
    /** Runs whose agent's `customer` search field is this value (`field.customer`). */
    customer: searchValue('customer')
      .optional()
      .meta({ description: "Runs whose agent's `customer` search field is this value (as `field.customer`)." }),
    /**
     * Runs whose agent's search field `<name>` is the value: `field.<name>=` parameters, gathered here by
     * runListQueryInput (an object in the query, form style exploded: each key is a parameter of its own).
     */
    fields: z
      .record(
        z.string().regex(SEARCH_PARAM_FORMAT, `field.<name>: a name matching ${SEARCH_FIELD_NAME_FORMAT}`),
        searchValue('field.<name>'),
      )
      .optional()
      .meta({
        description:
          "An agent's search field: `field.<name>=<value>` (e.g. `field.orderId=A-17`); several must all match.",
        param: { style: 'form', explode: true },
      }),
    status: z.enum(RUN_STATUSES).optional(),
    tenant: tenantNameSchema('tenant: 1-63 letters, digits, _ or -').optional(),
    // A name like a tenant's: one no agent has lists nothing.
    agent: agentNameSchema.optional(),
    since: timeSchema('since').optional(),
    until: timeSchema('until').optional(),
    cursor: z.string().max(200).optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();
export type RunListQuery = z.infer<typeof runListQuerySchema>;

/**
 * The query string as runListQuerySchema reads it: `field.<name>=` parameters gathered under `fields` (a name
 * repeated, or any parameter given twice, stays an array and fails its string check, naming it).
 */
export function runListQueryInput(query: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(query)) {
    if (k.startsWith('field.')) fields[k] = v;
    else out[k] = v;
  }
  if (Object.keys(fields).length > 0) out.fields = fields;
  return out;
}

/** The search terms of a listing query (none: the plain listing). */
export function searchTermsOfQuery(q: RunListQuery): SearchTerm[] {
  const fields = { ...q.fields, ...(q.customer !== undefined ? { 'field.customer': q.customer } : {}) };
  return [
    ...(q.subject !== undefined ? [{ field: SEARCH_SUBJECT, value: q.subject }] : []),
    ...Object.entries(fields).map(([field, value]) => ({ field: field.replace(/^field\./, ''), value })),
  ];
}

/** The tenants a principal's listing reads: undefined = all; [] = none. */
export function listedTenants(p: Principal, filter: string | undefined): readonly string[] | undefined {
  const allowed = p.role === 'producer' ? '*' : p.role === 'tenant' ? [p.tenant] : p.operator.tenants;
  if (filter !== undefined) return allowed === '*' || allowed.includes(filter) ? [filter] : [];
  return allowed === '*' ? undefined : allowed;
}

export class BadCursor extends Error {
  readonly code = 'invalid_cursor';
}

/** One page of runs as `p` may see them. Throws BadCursor for a cursor this API did not make. */
export async function runsPage(ctx: EngineContext, p: Principal, q: RunListQuery): Promise<RunPage> {
  const cursor = q.cursor !== undefined ? decodeCursor(q.cursor) : undefined;
  if (q.cursor !== undefined && !cursor) throw new BadCursor('cursor: not one this API returned');
  const tenants = listedTenants(p, q.tenant);
  const terms = searchTermsOfQuery(q);
  if (terms.length > 0) {
    const search: SearchQuery = {
      terms,
      limit: q.limit,
      ...(tenants !== undefined ? { tenants } : {}),
      ...(q.agent !== undefined ? { agent: q.agent } : {}),
      ...(q.status !== undefined ? { status: q.status } : {}),
      ...(cursor ? { cursor } : {}),
    };
    // Runs past Redis' retention live on in the archive: its matches merged in, a run in both once.
    return searchEverywhere(ctx, search);
  }
  // Runs past Redis' retention too: the archive's ended runs of the same filters, merged by their last change.
  return listEverywhere(ctx, {
    statuses: q.status ? [q.status] : RUN_STATUSES,
    limit: q.limit,
    ...(q.since !== undefined ? { since: q.since } : {}),
    ...(q.until !== undefined ? { until: q.until } : {}),
    ...(tenants !== undefined ? { tenants } : {}),
    ...(q.agent !== undefined ? { agent: q.agent } : {}),
    ...(cursor ? { cursor } : {}),
  });
}

export function runsListRouter(ctx: EngineContext, session?: SessionReader): Router {
  const r = Router();
  r.get('/v1/runs', async (req, res) => {
    if (!runTokensConfigured(ctx)) return void authUnconfigured(res, RUN_TOKEN_SETTINGS);
    const p = await principalFor(ctx, req, session);
    if (!p)
      return void res
        .status(401)
        .json({ error: 'unauthorized', message: 'an operator, producer or tenant token is required' });
    const parsed = runListQuerySchema.safeParse(runListQueryInput(req.query));
    if (!parsed.success) return void invalid(res, parsed.error);
    const refused =
      searchTermsOfQuery(parsed.data).length > 0
        ? (['since', 'until'] as const).find((f) => parsed.data[f] !== undefined)
        : undefined;
    if (refused)
      return void res.status(400).json({
        error: 'invalid_request',
        fields: [{ path: refused, message: `${refused}: not with a search (subject, customer, field.<name>)` }],
      });
    try {
      res.json(await runsPage(ctx, p, parsed.data));
    } catch (err) {
      if (err instanceof BadCursor)
        return void res
          .status(400)
          .json({ error: 'invalid_request', fields: [{ path: 'cursor', message: err.message }] });
      throw err;
    }
  });
  return r;
}
