/**
 * The fleet's client for producers and operators: every call of the HTTP API a producer or an operator makes, typed
 * from the same zod schemas the API validates with, answers as values and refusals as typed errors (./errors.ts).
 *
 * Retries (./transport.ts): a 503 store_unavailable or store_full is asked again after its Retry-After on every call;
 * a request that got no answer is asked again only when repeating it is safe: reads, a run's creation (with the
 * caller's Idempotency-Key, or with none: the subject's run) and an event's delivery (with the same eventId,
 * generated once per call unless given).
 */
import type { z } from 'zod';
import type { CreateRunRequest } from '../producer/schemas.js';
import type { eventBodySchema } from '../producer/events.js';
import type { runListQuerySchema } from '../http/operators/runsList.js';
import type { cancelSchema } from '../http/operators/cancel.js';
import type { retryBodySchema } from '../http/operators/retry.js';
import type { decisionSchema } from '../http/operators/approvals.js';
import type { findingSchema } from '../http/operators/reconciliations.js';
import type { continueSchema } from '../http/operators/versions.js';
import type { agentFlowBodySchema, tenantFlowBodySchema } from '../http/operators/flow.js';
import type { RunView } from '../http/runView.js';
import type { RunPage, RunRow } from '../runs/list.js';
import { followRunEvents, type FollowOptions, type RunEventMessage } from './events.js';
import { Transport, type Call, type TransportOptions } from './transport.js';

export type { CreateRunRequest, RunView, RunPage, RunRow, RunEventMessage, FollowOptions };

/** POST /v1/runs's answer: the run, whether this call created it, and the subject's run before it. */
export interface RunCreated {
  runId: string;
  /** false: the same Idempotency-Key again, or no key on a subject that has a run; `runId` is that run. */
  created: boolean;
  previousRunId?: string;
  /** The run's status, on an answer for a run that already existed. */
  status?: string;
}

/** GET /v1/runs's filters: `since`/`until` bound the last status change (epoch ms, a Date or ISO 8601). */
export type RunFilters = Omit<z.input<typeof runListQuerySchema>, 'since' | 'until' | 'limit'> & {
  since?: number | string | Date;
  until?: number | string | Date;
  /** Runs per page, 1-200 (default 50). */
  limit?: number;
};

/** POST /v1/events's body: `eventId` is generated when not given, so a retried delivery is one delivery. */
export type EventDelivery = z.input<typeof eventBodySchema>;
/** POST /v1/events's answer: the run it resumed, or how long the event is kept for a wait to come. */
export type EventOutcome =
  { outcome: 'resumed'; runId: string; duplicate?: true } | { outcome: 'kept'; expiresAt: number; duplicate?: true };

export type RetryExtension = z.input<typeof retryBodySchema>;
export type CancelBody = z.input<typeof cancelSchema>;
export type Decision = z.input<typeof decisionSchema>;
export type Finding = z.input<typeof findingSchema>;
export type ContinueBody = z.input<typeof continueSchema>;
export type TenantFlowChange = z.input<typeof tenantFlowBodySchema>;
export type AgentFlowChange = z.input<typeof agentFlowBodySchema>;

/** An answer whose fields the route's page of docs/http-api.md lists. */
export type Json = Record<string, unknown>;

export interface CallOptions {
  signal?: AbortSignal;
}

export type ClientOptions = TransportOptions;

const VERSION_QUEUE = '/v1/operators/version-mismatches';

const runPath = (runId: string, tail = '') => `/v1/runs/${encodeURIComponent(runId)}${tail}`;
const actionPath = (base: string, actionId: string) => `${base}/${encodeURIComponent(actionId)}`;

function timeParam(t: number | string | Date): string {
  return t instanceof Date ? String(t.getTime()) : String(t);
}

/**
 * @example
 * const fleet = new FleetClient({ url: 'http://127.0.0.1:3000', token: process.env.PRODUCER_TOKEN });
 * const { runId } = await fleet.createRun({ tenant: 'acme', agent: 'support', input: { ticket } });
 * for await (const e of fleet.followEvents(runId)) console.log(e.type, e.data);
 */
export class FleetClient {
  private readonly http: Transport;

  constructor(opts: ClientOptions) {
    this.http = new Transport(opts);
  }

  /** The API's base URL, as the client calls it. */
  get url(): string {
    return this.http.base;
  }

  private async call<T>(call: Call): Promise<T> {
    return (await this.http.json<T>(call)).body;
  }

  /**
   * POST /v1/runs. With an `idempotencyKey` (your own event's id), the key names the request: the same key again is
   * the same run, and a new key on a subject that has a run is a follow-up run of it (one run per subject at a time:
   * docs/http-api.md). Without one no key is sent, and the request is the subject's run: its latest run when it has
   * one (`created: false`), else a new one. Either way every attempt of this call, and a later call with the same
   * key (or, without one, on the same subject), is the same run, whatever answer was lost on the way.
   */
  async createRun(body: CreateRunRequest, opts: CallOptions & { idempotencyKey?: string } = {}): Promise<RunCreated> {
    return this.call({
      method: 'POST',
      path: '/v1/runs',
      body,
      ...(opts.idempotencyKey !== undefined ? { headers: { 'idempotency-key': opts.idempotencyKey } } : {}),
      onNoAnswer: 'repeat',
      signal: opts.signal,
    });
  }

  /** GET /v1/runs/:id: the run view. RunNotFound for an unknown id (or another tenant's). */
  async getRun(runId: string, opts: CallOptions = {}): Promise<RunView> {
    return this.call({ method: 'GET', path: runPath(runId), onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** GET /v1/runs: one page of runs, newest status change first; `nextCursor` (as `cursor`) gives the next. */
  async listRuns(filters: RunFilters = {}, opts: CallOptions = {}): Promise<RunPage> {
    const q = new URLSearchParams();
    for (const [name, value] of Object.entries(filters)) {
      if (value === undefined) continue;
      // An agent's search fields go as field.<name>=<value>, as GET /v1/runs reads them; a name given as the schema
      // spells it (`field.<name>`) or bare (`<name>`).
      if (typeof value === 'object' && !(value instanceof Date))
        for (const [field, v] of Object.entries(value)) q.set(field.startsWith('field.') ? field : `field.${field}`, v);
      else q.set(name, name === 'since' || name === 'until' ? timeParam(value) : String(value));
    }
    const qs = q.toString();
    return this.call({
      method: 'GET',
      path: `/v1/runs${qs ? `?${qs}` : ''}`,
      onNoAnswer: 'repeat',
      signal: opts.signal,
    });
  }

  /** Every run the filters match, page after page (GET /v1/runs with its cursor), newest status change first. */
  async *searchRuns(filters: Omit<RunFilters, 'cursor'> = {}, opts: CallOptions = {}): AsyncGenerator<RunRow> {
    let cursor: string | undefined;
    do {
      const page = await this.listRuns({ ...filters, ...(cursor ? { cursor } : {}) }, opts);
      yield* page.runs;
      cursor = page.nextCursor;
    } while (cursor);
  }

  /** POST /v1/runs/:id/cancel (an operator). Conflict when the run has already ended. */
  async cancelRun(runId: string, body: CancelBody = {}, opts: CallOptions = {}): Promise<Json> {
    return this.operatorPost(runPath(runId, '/cancel'), body, opts);
  }

  /**
   * POST /v1/runs/:id/retry (an operator): a stopped run goes on from its last commit, its limits raised by `ext`.
   * Conflict (`laterRunId` set) when a later run of the subject superseded it; Conflict `parent_moved_on`
   * (`parentRunId` set) for a child run whose parent took its outcome and moved on.
   */
  async retryRun(runId: string, ext: RetryExtension = {}, opts: CallOptions = {}): Promise<Json> {
    return this.operatorPost(runPath(runId, '/retry'), ext, opts);
  }

  /** GET /v1/approvals: the approvals waiting for a person. */
  async listApprovals(opts: CallOptions = {}): Promise<Json> {
    return this.call({ method: 'GET', path: '/v1/approvals', onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** POST /v1/approvals/:actionId: approve the action whose content has this fingerprint. */
  async approve(actionId: string, fingerprint: string, opts: CallOptions = {}): Promise<Json> {
    return this.decide(actionId, { decision: 'approve', fingerprint }, opts);
  }

  /** POST /v1/approvals/:actionId: reject it. */
  async reject(actionId: string, fingerprint: string, opts: CallOptions = {}): Promise<Json> {
    return this.decide(actionId, { decision: 'reject', fingerprint }, opts);
  }

  private async decide(actionId: string, body: Decision, opts: CallOptions): Promise<Json> {
    return this.operatorPost(actionPath('/v1/approvals', actionId), body, opts);
  }

  /** GET /v1/reconciliations: the actions in doubt handed to a person, with their evidence. */
  async listReconciliations(opts: CallOptions = {}): Promise<Json> {
    return this.call({ method: 'GET', path: '/v1/reconciliations', onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** POST /v1/reconciliations/:actionId: settle an action in doubt. */
  async resolve(actionId: string, finding: Finding, opts: CallOptions = {}): Promise<Json> {
    return this.operatorPost(actionPath('/v1/reconciliations', actionId), finding, opts);
  }

  /** GET /v1/operators/version-mismatches: runs parked for a version change, and the versions served. */
  async versionQueue(query: { limit?: number } = {}, opts: CallOptions = {}): Promise<Json> {
    const qs = query.limit !== undefined ? `?limit=${query.limit}` : '';
    return this.call({ method: 'GET', path: `${VERSION_QUEUE}${qs}`, onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** POST .../version-mismatches/:id/continue: re-pin a parked run to a served version and resume it. */
  async continueVersion(runId: string, body: ContinueBody = {}, opts: CallOptions = {}): Promise<Json> {
    return this.operatorPost(`${VERSION_QUEUE}/${encodeURIComponent(runId)}/continue`, body, opts);
  }

  /** POST .../version-mismatches/:id/cancel: cancel a run of the version queue. */
  async cancelVersionParked(runId: string, opts: CallOptions = {}): Promise<Json> {
    return this.operatorPost(`${VERSION_QUEUE}/${encodeURIComponent(runId)}/cancel`, {}, opts);
  }

  /**
   * GET /v1/flow: each tenant's line and share, the agents' slots, rate limits, changes (a tenant-scoped operator: its
   * tenants' lines without the share, and no agents or fleet).
   */
  async flow(opts: CallOptions = {}): Promise<Json> {
    return this.call({ method: 'GET', path: '/v1/flow', onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** GET /v1/spend: a day's (YYYY-MM-DD) or month's (YYYY-MM) model spend by tenant, agent and model, in µ$. */
  async spend(period?: string, opts: CallOptions = {}): Promise<Json> {
    const qs = period === undefined ? '' : `?period=${encodeURIComponent(period)}`;
    return this.call({ method: 'GET', path: `/v1/spend${qs}`, onNoAnswer: 'repeat', signal: opts.signal });
  }

  /** PUT /v1/flow/tenants/:tenant: a tenant's weight or limit at run time (null: back to the configured value). */
  async setTenantFlow(tenant: string, change: TenantFlowChange, opts: CallOptions = {}): Promise<Json> {
    return this.put(`/v1/flow/tenants/${encodeURIComponent(tenant)}`, change, opts);
  }

  /** PUT /v1/flow/agents/:agent: an agent's concurrency limit at run time. */
  async setAgentFlow(agent: string, change: AgentFlowChange, opts: CallOptions = {}): Promise<Json> {
    return this.put(`/v1/flow/agents/${encodeURIComponent(agent)}`, change, opts);
  }

  /**
   * POST /v1/events: deliver an event to the run of `agent` waiting on `key` (or keep it for a wait to come). The
   * eventId (given, else one generated for this call) makes a retry of this call one delivery.
   */
  async deliverEvent(event: EventDelivery, opts: CallOptions = {}): Promise<EventOutcome> {
    const body = { ...event, eventId: event.eventId ?? globalThis.crypto.randomUUID() };
    return this.call({ method: 'POST', path: '/v1/events', body, onNoAnswer: 'repeat', signal: opts.signal });
  }

  /**
   * GET /v1/runs/:id/events as an async iterator: each event once, in order, across disconnects (it resumes with
   * Last-Event-ID); it ends after the run's terminal status change, once the run, asked then, still stands ended (an
   * operator's retry since: it follows the run at work again).
   */
  followEvents(runId: string, opts: FollowOptions = {}): AsyncGenerator<RunEventMessage, void, undefined> {
    return followRunEvents(this.http, runId, opts);
  }

  /** An operator's move is decided by compare-and-set: asked again on a 503, never after a lost answer. */
  private operatorPost(path: string, body: unknown, opts: CallOptions): Promise<Json> {
    return this.call({ method: 'POST', path, body, onNoAnswer: 'fail', signal: opts.signal });
  }

  private put(path: string, body: unknown, opts: CallOptions): Promise<Json> {
    return this.call({ method: 'PUT', path, body, onNoAnswer: 'fail', signal: opts.signal });
  }
}
