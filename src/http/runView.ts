/**
 * The run view served by GET /v1/runs/:id: status, cursor, budget, transcript, effects.
 * Never fails for a run that exists: whatever in its stored data no longer parses (the
 * spec, a journal entry, a ledger record, a limit past what a date holds) is left out and
 * named in `notes`, and the run's status and reason are shown from its hash.
 */
import { formatMicros } from '../core/prices.js';
import type { EngineContext } from '../runs/engineContext.js';
import { decodeReadable, type JournalEntry } from '../core/journal.js';
import type { ModelOptions } from '../core/model.js';
import { isRunId } from '../store/keys.js';
import type { RunSpec } from '../runs/spec.js';
import type { WaitRecord } from '../runs/waits.js';
import type { RunStatus } from '../core/status.js';
import { readBudget, readRun, readStatuses } from '../store/runRecord.js';
import { readJournal } from '../store/runJournal.js';

export interface RunView {
  runId: string;
  tenant: string;
  /** The subject key (agent.key(input)): the subject's runs form a chain (previousRunId / nextRunId). */
  key: string;
  /** The intake event's key (webhook event id, Idempotency-Key), when the run was started by one. */
  event?: string;
  /** The subject's run before this one (this run is its follow-up). */
  previousRunId?: string;
  /** The subject's run after this one (the follow-up of this run). */
  nextRunId?: string;
  status: RunStatus;
  reason: string;
  step: number;
  /**
   * A run parked on a wait (sleeping | waiting_event | waiting_child): what it waits for and when it wakes (ISO
   * time; for children, the run's deadline), and the children it waits on, in the order the model asked.
   */
  wait?: { kind: 'sleep' | 'event' | 'child'; wakeAt: string; childRunIds?: string[] };
  /** The run whose agent tool started this one (src/runs/children.ts). */
  parentRunId?: string;
  /** The child runs this run's agent tools started, with their statuses ('' for one not created yet). */
  children?: { runId: string; status: RunStatus | '' }[];
  /**
   * `model` is the pinned provider's name; `modelId` and `modelOptions` the rest of the pinned choice
   * (absent for runs pinned before model ids were: they run on the provider's default model).
   */
  agent: {
    name: string;
    model: string;
    modelId?: string;
    modelOptions?: ModelOptions;
    agentVersion: string;
    toolsHash: string;
  };
  budget: {
    /** maxCost: µ$ (1e-6 USD), absent when the run has no money budget. */
    limits: { maxSteps: number; maxTokens: number; maxWallMs: number; deadlineAt: string; maxCost?: number };
    /** cost: µ$ the run's model attempts cost, failed ones included (src/core/prices.ts). */
    used: { steps: number; tokens: number; wallMs: number; cost: number };
  };
  transcript: JournalEntry[];
  effects: unknown[];
  /** What could not be read from the run's stored data (codes and field names, never values). */
  notes?: string[];
}

export type EffectsLister = (runId: string) => Promise<unknown[]>;

/**
 * Undefined for an unknown run, and for a malformed id before any Redis access (a `:journal` suffix would name another
 * key).
 */
export async function runView(
  ctx: EngineContext,
  runId: string,
  listEffects?: EffectsLister,
  nowMs = Date.now(),
): Promise<RunView | undefined> {
  if (!isRunId(runId)) return undefined;
  const k = ctx.keys.run(runId);
  const [state, hash, stored] = await Promise.all([
    ctx.store.readState(runId),
    readRun(ctx.redis, ctx.keys, runId, [
      'tenant',
      'agent',
      'key',
      'model',
      'agentVersion',
      'toolsHash',
      'createdAt',
      'finishedAt',
      'previousRunId',
      'nextRunId',
    ]),
    readBudget(ctx.redis, ctx.keys, runId, ['maxSteps', 'maxTokens', 'maxWallMs', 'deadlineAt', 'maxCost']),
  ]);
  if (!state || !hash) return undefined;
  const notes: string[] = [];
  const spec = await ctx.store.readSpec(runId).catch((err: unknown) => {
    notes.push(`spec_unreadable: ${issuePath(err)}`);
    return undefined;
  });
  if (!spec && notes.length === 0) notes.push('spec_missing');
  const { tenant, agent: agentName, key: intakeKey, model, agentVersion, toolsHash, previousRunId, nextRunId } = hash;
  // The budget hash holds the limits in force (an operator's retry may have extended the spec's).
  const { maxCost: storedCost, ...storedLimits } = stored;
  const limits: RunSpec['limits'] =
    stored.maxSteps > 0
      ? { ...storedLimits, ...(storedCost > 0 ? { maxCost: storedCost } : {}) }
      : (spec?.limits ?? storedLimits);
  const createdAt = spec?.createdAt ?? hash.createdAt;
  const finishedAt = hash.finishedAt;
  const deadlineAt = isoOf(limits.deadlineAt);
  if (deadlineAt === '') notes.push('deadline_unreadable');
  const [transcript, effects, children] = await Promise.all([
    readTranscript(ctx, k, notes),
    listEffects
      ? listEffects(runId).catch(() => (notes.push('effects_unreadable'), [] as unknown[]))
      : Promise.resolve([]),
    childrenOf(ctx, k.children),
  ]);
  return {
    runId,
    tenant: spec?.tenant ?? tenant,
    key: spec?.key ?? intakeKey,
    ...(spec?.event !== undefined ? { event: spec.event } : {}),
    ...(previousRunId ? { previousRunId } : {}),
    ...(nextRunId ? { nextRunId } : {}),
    status: state.status,
    reason: state.reason,
    step: state.cursor,
    ...(state.wait ? { wait: waitView(state.wait) } : {}),
    ...(spec?.parent ? { parentRunId: spec.parent.runId } : {}),
    ...(children.length > 0 ? { children } : {}),
    agent: {
      name: spec?.agent ?? agentName,
      model: spec?.model ?? model,
      ...(spec?.modelId !== undefined ? { modelId: spec.modelId } : {}),
      ...(spec?.modelOptions ? { modelOptions: spec.modelOptions } : {}),
      agentVersion: spec?.agentVersion ?? agentVersion,
      toolsHash: spec?.toolsHash ?? toolsHash,
    },
    budget: {
      limits: { ...limits, deadlineAt },
      used: {
        steps: state.used.steps,
        tokens: state.used.tokens,
        wallMs: createdAt > 0 ? (finishedAt || nowMs) - createdAt : 0,
        cost: state.used.cost ?? 0,
      },
    },
    transcript,
    effects,
    ...(notes.length > 0 ? { notes } : {}),
  };
}

function waitView(wait: WaitRecord): NonNullable<RunView['wait']> {
  const wakeAt = new Date(wait.at).toISOString();
  return wait.kind === 'child'
    ? { kind: wait.kind, wakeAt, childRunIds: wait.children.map((c) => c.runId) }
    : { kind: wait.kind, wakeAt };
}

/**
 * GET /v1/runs/:id's body for a run Redis let go, from the archive, with its children's statuses as they stand now:
 * the view was archived when the run ended, and a child may end after that (or be retried by an operator). A child
 * Redis still holds answers from its record, one it let go from its archive row; one neither holds keeps the status
 * archived with its parent. Undefined when the archive has no such run (or there is no archive).
 */
export async function archivedRunView(
  ctx: Pick<EngineContext, 'redis' | 'keys' | 'archive'>,
  runId: string,
): Promise<Record<string, unknown> | undefined> {
  const archive = ctx.archive;
  const view = await archive?.view(runId);
  if (!archive || !view || !Array.isArray(view.children) || view.children.length === 0) return view;
  const children = view.children as { runId: string; status: RunStatus | '' }[];
  const ids = children.map((c) => c.runId);
  const hot = await readStatuses(ctx.redis, ctx.keys, ids);
  const cold = ids.filter((_, i) => hot[i] === undefined);
  const archived = cold.length > 0 ? await archive.treeNodes(cold) : new Map<string, { status: RunStatus }>();
  return {
    ...view,
    children: children.map((c, i) => ({ ...c, status: hot[i] ?? archived.get(c.runId)?.status ?? c.status })),
  };
}

/** The run's children with their statuses, by run id. */
async function childrenOf(ctx: EngineContext, key: string): Promise<{ runId: string; status: RunStatus | '' }[]> {
  const ids = (await ctx.redis.smembers(key)).sort();
  const statuses = await readStatuses(ctx.redis, ctx.keys, ids);
  return ids.map((runId, i) => ({ runId, status: statuses[i] ?? '' }));
}

/**
 * The journal, entry by entry: an entry that no longer parses is left out and noted. Listed or packed (an ended run's,
 * src/store/runJournal.ts); read as bytes: an entry may be stored compressed (packEntry), which no string decoding
 * survives.
 */
async function readTranscript(
  ctx: EngineContext,
  k: { journal: string; journalPacked: string },
  notes: string[],
): Promise<JournalEntry[]> {
  return decodeReadable(await readJournal(ctx.redis, k), (i) => notes.push(`journal_entry_unreadable: ${i}`));
}

/** An ISO date, or '' for a time no Date can hold. */
function isoOf(ms: number): string {
  const d = new Date(ms);
  return Number.isFinite(d.getTime()) ? d.toISOString() : '';
}

/** The first invalid field of a spec that no longer parses (its path, never its value). */
function issuePath(err: unknown): string {
  const issues = (err as { issues?: { path?: PropertyKey[] }[] }).issues;
  if (!issues) return 'json';
  const path = issues[0]?.path?.map(String).join('.') ?? '';
  return /^[\w.]{1,80}$/.test(path) ? path : '(root)';
}

/** HTML-escapes any value (strings as they are, everything else as JSON). */
export function escapeHtml(value: unknown): string {
  const s = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return s.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

interface EffectLike {
  actionId?: unknown;
  tool?: unknown;
  state?: unknown;
  step?: unknown;
  idempotencyKey?: unknown;
  receipt?: unknown;
  compensates?: unknown;
  compensatedBy?: unknown;
  attempts?: unknown;
  history?: { from?: unknown; to?: unknown; at?: unknown; by?: unknown; why?: unknown; evidence?: unknown }[];
}

const td = (v: unknown) => `<td>${v === undefined || v === null ? '' : escapeHtml(v)}</td>`;
const at = (ms: unknown) => (typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms).toISOString() : '');

function transcriptRow(e: JournalEntry): string {
  switch (e.kind) {
    case 'decision':
      return `<tr class="decision">${td(e.step)}${td('decision')}${td(e.toolCalls.map((c) => c.name).join(', ') || '(no tool)')}<td><pre>${escapeHtml(e.final ?? e.toolCalls.map((c) => ({ id: c.id, args: c.args })))}</pre></td></tr>`;
    case 'observation':
      return `<tr class="observation">${td(e.step)}${td(`observation: ${e.status}`)}${td(e.tool)}<td><pre>${escapeHtml(e.output)}</pre></td></tr>`;
    case 'status':
      return `<tr class="status">${td(e.step)}${td(`status: ${e.status}`)}${td('')}${td(e.reason)}</tr>`;
    case 'operator':
      return `<tr class="operator">${td(e.step)}${td(`operator: ${e.action}`)}${td(e.by)}${td(`${e.actionId ?? ''} ${e.detail}`)}</tr>`;
  }
}

export function effectBlock(raw: unknown): string {
  const e = (raw ?? {}) as EffectLike;
  const id = typeof e.actionId === 'string' ? e.actionId : '';
  const links = [
    typeof e.compensates === 'string'
      ? `compensates <a href="#${escapeHtml(e.compensates)}">${escapeHtml(e.compensates)}</a>`
      : '',
    typeof e.compensatedBy === 'string'
      ? `compensated by <a href="#${escapeHtml(e.compensatedBy)}">${escapeHtml(e.compensatedBy)}</a>`
      : '',
  ]
    .filter(Boolean)
    .join('; ');
  const history = (e.history ?? [])
    .map(
      (x) =>
        `<tr>${td(at(x.at))}${td(x.from ?? '')}${td(x.to)}${td(x.by)}${td(x.why)}<td><pre>${x.evidence === undefined ? '' : escapeHtml(x.evidence)}</pre></td></tr>`,
    )
    .join('');
  return `<section class="effect" id="${escapeHtml(id)}">
<h3><code>${escapeHtml(id)}</code> ${escapeHtml(e.tool)} <span class="state" data-state="${escapeHtml(e.state)}">${escapeHtml(e.state)}</span></h3>
<p>step ${escapeHtml(e.step)} · key <code>${escapeHtml(e.idempotencyKey)}</code> · receipt <code>${escapeHtml(e.receipt ?? '')}</code> · attempts ${escapeHtml(e.attempts ?? 0)}${links ? ` · ${links}` : ''}</p>
<table class="history"><thead><tr><th>at</th><th>from</th><th>to</th><th>by</th><th>why</th><th>evidence</th></tr></thead><tbody>${history}</tbody></table>
</section>`;
}

/** A row linking the subject's previous or next run (the follow-up chain), or nothing. */
function chainRow(label: string, id: string, runId: string | undefined): string {
  if (runId === undefined) return '';
  return `<tr><th>${label}</th><td><a id="${id}" href="/runs/${encodeURIComponent(runId)}">${escapeHtml(runId)}</a></td></tr>\n`;
}

/**
 * The run view as a small read-only HTML page for operators (served at
 * /runs/:id, linked from Bull Board): status, budget, transcript, effects
 * with their history. Every value is escaped; the page has no script.
 */
export function renderRunHtml(view: RunView): string {
  const { limits, used } = view.budget;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>run ${escapeHtml(view.runId)}</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.2rem .5rem;vertical-align:top;text-align:left}pre{margin:0;white-space:pre-wrap;max-width:60rem}.state{padding:0 .4rem;border-radius:.3rem;background:#eee}</style>
</head><body>
<h1>Run <code id="run-id">${escapeHtml(view.runId)}</code></h1>
<table class="summary"><tbody>
<tr><th>status</th><td id="status">${escapeHtml(view.status)}</td></tr>
<tr><th>reason</th><td id="reason">${escapeHtml(view.reason)}</td></tr>
${view.wait ? `<tr><th>wakes</th><td id="wake-at">${escapeHtml(`${view.wait.kind} · ${view.wait.wakeAt}`)}</td></tr>\n` : ''}<tr><th>tenant</th><td>${escapeHtml(view.tenant)}</td></tr>
<tr><th>key</th><td>${escapeHtml(view.key)}</td></tr>
${chainRow('previous run', 'previous-run', view.previousRunId)}${chainRow('next run', 'next-run', view.nextRunId)}${chainRow('parent run', 'parent-run', view.parentRunId)}${(view.children ?? []).map((c) => chainRow(`child run (${c.status || 'not created'})`, `child-${c.runId}`, c.runId)).join('')}<tr><th>step</th><td>${escapeHtml(view.step)}</td></tr>
<tr><th>agent</th><td>${escapeHtml(`${view.agent.name} ${view.agent.agentVersion} · ${view.agent.model}${view.agent.modelId !== undefined ? `/${view.agent.modelId}` : ''} · tools ${view.agent.toolsHash}`)}</td></tr>
${view.status === 'needs_human' && view.reason.startsWith('version_mismatch') ? `<tr><th>version queue</th><td id="version-queue">parked for a version change (pinned ${escapeHtml(`${view.agent.agentVersion}/${view.agent.toolsHash}`)}): continue it under a served version or cancel it, from the console or with <code>agentctl versions continue|cancel ${escapeHtml(view.runId)}</code></td></tr>\n` : ''}${view.notes ? `<tr><th>notes</th><td id="notes">${escapeHtml(view.notes.join('; '))}</td></tr>\n` : ''}</tbody></table>
<h2>Budget</h2>
<table id="budget"><thead><tr><th></th><th>steps</th><th>tokens</th><th>wall clock ms</th><th>cost USD</th></tr></thead><tbody>
<tr><th>used</th>${td(used.steps)}${td(used.tokens)}${td(used.wallMs)}${td(formatMicros(used.cost))}</tr>
<tr><th>limit</th>${td(limits.maxSteps)}${td(limits.maxTokens)}${td(limits.maxWallMs)}${td(limits.maxCost ? formatMicros(limits.maxCost) : 'none')}</tr>
</tbody></table>
<p>deadline ${escapeHtml(limits.deadlineAt)}</p>
<h2>Transcript</h2>
<table id="transcript"><thead><tr><th>step</th><th>entry</th><th>tool</th><th>content</th></tr></thead><tbody>
${view.transcript.map(transcriptRow).join('\n')}
</tbody></table>
<h2>Effects</h2>
<div id="effects">${view.effects.length === 0 ? '<p>none</p>' : view.effects.map(effectBlock).join('\n')}</div>
</body></html>
`;
}
