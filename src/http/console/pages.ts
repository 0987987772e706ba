/**
 * The console's server-rendered HTML. Every value that comes from a run (the
 * customer's ticket, the model's words, tool arguments and results, evidence)
 * goes through escapeHtml; the pages carry no inline script or style (the
 * Content-Security-Policy forbids both): behaviour is htmx plus console.js,
 * both served from /console/static.
 */
import { formatMicros } from '../../core/prices.js';
import type { JournalEntry } from '../../core/journal.js';
import type { Operator } from '../operatorIdentity.js';
import { effectBlock, escapeHtml as e, type RunView } from '../runView.js';
import type { PendingApproval } from '../operators/approvals.js';
import type { RunRow } from '../../runs/list.js';
import { isTerminal, RUN_STATUSES } from '../../core/status.js';
import { RETRYABLE_STATUSES } from '../../runs/retryRun.js';
import type { RunJob } from './jobs.js';
import type { Bar, TreeNode } from './ticket.js';
import { chainBlock, searchCell, timelineSvg, treeBlock } from './ticketPages.js';

export const CONSOLE = '/console';

const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
});

export function layout(title: string, body: string, op?: Operator, csrf?: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${e(title)} · agent console</title>
<meta name="htmx-config" content="${e(HTMX_CONFIG)}">
<link rel="stylesheet" href="${CONSOLE}/static/console.css">
<script src="${CONSOLE}/static/htmx.min.js" defer></script>
<script src="${CONSOLE}/static/console.js" defer></script>
</head><body>
<header><a class="brand" href="${CONSOLE}/runs">agent console</a>
<nav><a href="${CONSOLE}/runs">runs</a> <a href="${CONSOLE}/runs?status=waiting_approval">approvals</a> <a href="${CONSOLE}/runs?status=needs_human">human queue</a> <a href="${CONSOLE}/runs?status=sleeping">sleeping</a> <a href="${CONSOLE}/runs?status=waiting_event">waiting for events</a> <a href="${CONSOLE}/runs?status=waiting_child">waiting for child runs</a> <a href="${CONSOLE}/flow">flow</a> <a href="${CONSOLE}/spend">spend</a> <a href="/admin/queues">queues</a></nav>
${op ? `<form class="who" method="post" action="${CONSOLE}/logout"><span id="operator">${e(op.name)}</span> <span class="role">${e(op.role)}${op.tenants === '*' ? '' : ` · ${e(op.tenants.join(', '))}`}</span>${csrfField(csrf)}<button>log out</button></form>` : ''}
</header>
<main>${body}</main>
</body></html>
`;
}

const csrfField = (csrf: string | undefined) => (csrf ? `<input type="hidden" name="csrf" value="${e(csrf)}">` : '');

export function loginPage(csrf: string, error?: string): string {
  return layout(
    'log in',
    `<h1>Log in</h1>
${error ? `<p class="error" id="login-error">${e(error)}</p>` : ''}
<form method="post" action="${CONSOLE}/login" class="login">
<label>operator token or identity provider JWT <input type="password" name="token" autocomplete="off" required></label>
<input type="hidden" name="csrf" value="${e(csrf)}">
<button id="login">log in</button>
</form>`,
  );
}

export interface ListFilters {
  subject?: string;
  customer?: string;
  /** `name=value` of the search box's field input (the route turns it into `field.<name>`). */
  field?: string;
  status?: string;
  tenant?: string;
  agent?: string;
  since?: number;
  until?: number;
}

/** A datetime-local field's value (UTC, to the second) for a time bound. */
const localValue = (ms: number | undefined) => (ms === undefined ? '' : new Date(ms).toISOString().slice(0, 19));

export function runsPage(
  op: Operator,
  csrf: string,
  f: ListFilters,
  rows: RunRow[],
  nextCursor: string | undefined,
): string {
  const option = (s: string) => `<option value="${e(s)}"${f.status === s ? ' selected' : ''}>${e(s)}</option>`;
  const q = (extra: Record<string, string>) =>
    new URLSearchParams({
      ...(f.subject ? { subject: f.subject } : {}),
      ...(f.customer ? { customer: f.customer } : {}),
      ...(f.field ? { field: f.field } : {}),
      ...(f.status ? { status: f.status } : {}),
      ...(f.tenant ? { tenant: f.tenant } : {}),
      ...(f.agent ? { agent: f.agent } : {}),
      ...(f.since !== undefined ? { since: String(f.since) } : {}),
      ...(f.until !== undefined ? { until: String(f.until) } : {}),
      ...extra,
    }).toString();
  return layout(
    'runs',
    `<h1>Runs</h1>
<form method="get" action="${CONSOLE}/runs" class="search" id="search-form" role="search">
<label>ticket (subject) <input name="subject" id="search-subject" value="${e(f.subject ?? '')}"></label>
<label>customer <input name="customer" id="search-customer" value="${e(f.customer ?? '')}"></label>
<label>field <input name="field" id="search-field" placeholder="name=value" value="${e(f.field ?? '')}"></label>
<button id="search">search</button>
</form>
<form method="get" action="${CONSOLE}/runs" class="filters">
<label>status <select name="status" id="filter-status"><option value="">any</option>${RUN_STATUSES.map(option).join('')}</select></label>
<label>tenant <input name="tenant" id="filter-tenant" value="${e(f.tenant ?? '')}"></label>
<label>agent <input name="agent" id="filter-agent" value="${e(f.agent ?? '')}"></label>
<label>changed since (UTC) <input type="datetime-local" step="1" name="since" id="filter-since" value="${e(localValue(f.since))}"></label>
<label>before (UTC) <input type="datetime-local" step="1" name="until" id="filter-until" value="${e(localValue(f.until))}"></label>
<button id="filter">filter</button>
</form>
<table id="runs"><thead><tr><th>run</th><th>status</th><th>reason</th><th>tenant</th><th>agent</th><th>ticket (subject)</th><th>search fields</th><th>step</th><th>cost USD</th><th>since</th></tr></thead><tbody>
${rows.map((r) => `<tr data-run="${e(r.runId)}"><td><a href="${CONSOLE}/runs/${e(r.runId)}">${e(r.runId)}</a></td><td><span class="status" data-status="${e(r.status)}">${e(r.status)}</span></td><td>${e(r.reason)}</td><td>${e(r.tenant)}</td><td>${e(r.agent)}</td><td class="subject"><a href="${CONSOLE}/runs?${e(new URLSearchParams({ subject: r.subject }).toString())}">${e(r.subject)}</a></td><td class="search">${searchCell(r)}</td><td>${e(r.step)}</td><td class="cost" data-micros="${e(r.cost)}">${e(formatMicros(r.cost))}</td><td>${e(new Date(r.statusAt).toISOString())}</td></tr>`).join('\n')}
</tbody></table>
${rows.length === 0 ? '<p id="no-runs">no runs match</p>' : ''}
${nextCursor ? `<p><a id="next-page" href="${CONSOLE}/runs?${e(q({ cursor: nextCursor }))}">next page</a></p>` : ''}`,
    op,
    csrf,
  );
}

export interface HumanItem {
  actionId: string;
  /** The run's subject (the ticket) the item is of. */
  subject: string;
  tool: string;
  state: string;
  args: unknown;
  idempotencyKey: string;
  since: number;
  /** An original in compensation_required whose compensation its service refused: the finding `accept` closes it. */
  compensationRefused?: boolean;
  history: { from?: string | null; to: string; at: number; by: string; why: string; evidence?: unknown }[];
}

export interface RunPageData {
  view: RunView;
  input: unknown;
  agent: string;
  jobId: string;
  queueName: string;
  approvals: PendingApproval[];
  humanItems: HumanItem[];
  /** The run's step jobs, latest first (jobs.ts). */
  jobs: RunJob[];
  /** Set when the run is in the version queue: its pin and the versions live workers serve for its agent. */
  versionChange?: { pinned: string; served: { agentVersion: string; toolsHash: string; label: string }[] };
  notice?: string;
  /** The subject's runs, oldest first (ticket.ts). */
  chain: RunRow[];
  tree: TreeNode;
  bars: Bar[];
  /** When each conversation entry was written (ms), in transcript order. */
  times: (number | undefined)[];
  /** Read from the archive: Redis let the run go, so nothing can act on it. */
  archived?: boolean;
}

export function runPage(op: Operator, csrf: string, d: RunPageData): string {
  const id = d.view.runId;
  return layout(
    `run ${id}`,
    `<p><a href="${CONSOLE}/runs">← runs</a></p>
<h1>Run <code id="run-id">${e(id)}</code></h1>
${d.notice ? `<p class="notice" id="notice">${e(d.notice)}</p>` : ''}
<p class="notice" id="live-held" hidden>Live updates are paused while you edit a form below; reload to see the latest.</p>
<div id="live"${d.archived ? '' : ` data-events="/v1/runs/${e(id)}/events"`} data-live="${CONSOLE}/runs/${e(id)}/live">
${runLive(op, csrf, d)}
</div>`,
    op,
    csrf,
  );
}

/** The run's place in a tree of agent tools: its parent run, its child runs with their statuses. */
function treeRows(v: RunPageData['view']): string {
  const link = (id: string) => `<a href="${CONSOLE}/runs/${e(id)}">${e(id)}</a>`;
  const parent = v.parentRunId ? `<tr><th>parent run</th><td id="parent-run">${link(v.parentRunId)}</td></tr>\n` : '';
  const children = v.children?.length
    ? `<tr><th>child runs</th><td id="child-runs">${v.children.map((c) => `${link(c.runId)} ${e(c.status || 'not created')}`).join('<br>')}</td></tr>\n`
    : '';
  return parent + children;
}

/** The part of the run page that live updates replace (htmx GET .../live on each run event). */
export function runLive(op: Operator, csrf: string, d: RunPageData): string {
  const v = d.view;
  const acts = op.role === 'operator' && !d.archived;
  const jobLink = d.jobId
    ? `/admin/queues/queue/${encodeURIComponent(d.queueName)}/${encodeURIComponent(d.jobId)}`
    : `/admin/queues/queue/${encodeURIComponent(d.queueName)}`;
  return `<table class="summary"><tbody>
<tr><th>status</th><td><span class="status" id="status" data-status="${e(v.status)}">${e(v.status)}</span></td></tr>
<tr><th>reason</th><td id="reason">${e(v.reason)}</td></tr>
<tr><th>tenant</th><td id="tenant">${e(v.tenant)}</td></tr>
<tr><th>agent</th><td>${e(d.agent)} · ${e(v.agent.agentVersion)} · ${e(v.agent.model)}${v.agent.modelId !== undefined ? ` / ${e(v.agent.modelId)}` : ''}</td></tr>
<tr><th>step</th><td>${e(v.step)}</td></tr>
<tr><th>ticket (subject)</th><td id="run-subject">${e(v.key)}</td></tr>
${treeRows(v)}<tr><th>jobs</th><td><a id="job-link" href="${e(jobLink)}">${e(d.jobId || d.queueName)} in Bull Board</a></td></tr>
${v.notes ? `<tr><th>notes</th><td>${e(v.notes.join('; '))}</td></tr>` : ''}
</tbody></table>
${acts && !isTerminal(v.status) ? `<form method="post" action="${CONSOLE}/runs/${e(v.runId)}/cancel" class="inline">${csrfField(csrf)}<button id="cancel" class="danger">cancel run</button></form>` : ''}
${acts && RETRYABLE.has(v.status) ? retryForm(v, csrf) : ''}
${d.archived ? '<p class="notice" id="archived-note">from the archive: Redis let this run go after its retention (RUN_RETENTION_MS); its record is read only</p>' : !acts ? '<p class="viewer" id="viewer-note">viewer: you can follow this run but not act on it</p>' : ''}
${d.approvals.map((a) => approvalBlock(v.runId, a, acts, csrf)).join('\n')}
${d.humanItems.map((h) => humanBlock(v.runId, h, acts, csrf)).join('\n')}
${d.versionChange ? versionBlock(v.runId, d.versionChange, acts, csrf) : ''}
${chainBlock(v.runId, v.key, d.chain, v.previousRunId, v.nextRunId)}
${treeBlock(v.parentRunId, d.tree)}
${timelineSvg(d.bars)}
<h2>Budget</h2>
${budget(v)}
<h2>Jobs</h2>
${jobsTable(d)}
<h2>Input</h2>
<pre id="input">${e(JSON.stringify(d.input, null, 2))}</pre>
<h2>Conversation</h2>
<ol id="conversation">${v.transcript.map((m, i) => message(m, d.times[i])).join('\n')}</ol>
<h2>Effects</h2>
<div id="effects">${v.effects.length === 0 ? '<p>none</p>' : v.effects.map(effectBlock).join('\n')}</div>`;
}

const RETRYABLE: ReadonlySet<string> = new Set(RETRYABLE_STATUSES);

/** Retry from the last commit, with optional extra budget (blank = none): POST .../retry, same CSRF as every form. */
function retryForm(v: RunView, csrf: string): string {
  return `<form method="post" action="${CONSOLE}/runs/${e(v.runId)}/retry" class="retry" id="retry-form">${csrfField(csrf)}
<span>retry from step ${e(v.step)} (confirmed effects are not sent again), with more</span>
<label>steps <input type="number" min="0" name="steps" id="retry-steps"></label>
<label>tokens <input type="number" min="0" name="tokens" id="retry-tokens"></label>
<label>wall clock ms <input type="number" min="0" name="wallMs" id="retry-wall-ms"></label>
${v.budget.limits.maxCost ? '<label>cost µ$ <input type="number" min="0" name="cost" id="retry-cost"></label>\n' : ''}<button id="retry">retry run</button></form>`;
}

/** The run's jobs in Bull Board: a failed one keeps its error there. */
function jobsTable(d: RunPageData): string {
  if (d.jobs.length === 0) return '<p id="jobs">none recorded</p>';
  const link = (id: string) => `/admin/queues/queue/${encodeURIComponent(d.queueName)}/${encodeURIComponent(id)}`;
  return `<table id="jobs"><thead><tr><th>job</th><th>step</th><th>state</th></tr></thead><tbody>
${d.jobs.map((j) => `<tr data-job="${e(j.jobId)}"><td>${j.state === 'removed' ? e(j.jobId) : `<a class="job-link" href="${e(link(j.jobId))}">${e(j.jobId)}</a>`}</td><td>${e(j.step)}</td><td>${e(j.state)}</td></tr>`).join('\n')}
</tbody></table>`;
}

/** The run's cost in USD, against its money budget when it has one. */
function costRow(v: RunView): string {
  const { limits, used } = v.budget;
  const max = limits.maxCost;
  const meter = max
    ? `<meter min="0" max="${e(max)}" value="${e(Math.min(used.cost, max))}" high="${e(max * 0.8)}"></meter>`
    : '';
  return `<tr id="cost"><th>cost USD</th><td>${e(formatMicros(used.cost))}</td><td>${max ? e(formatMicros(max)) : 'none'}</td><td>${meter}</td></tr>`;
}

function budget(v: RunView): string {
  const { limits, used } = v.budget;
  const row = (name: string, u: number, l: number) =>
    `<tr><th>${name}</th><td>${e(u)}</td><td>${e(l)}</td><td><meter min="0" max="${e(l)}" value="${e(Math.min(u, l))}" high="${e(l * 0.8)}"></meter></td></tr>`;
  return `<table id="budget"><thead><tr><th></th><th>used</th><th>limit</th><th></th></tr></thead><tbody>
${row('steps', used.steps, limits.maxSteps)}${row('tokens', used.tokens, limits.maxTokens)}${row('wall clock ms', used.wallMs, limits.maxWallMs)}${costRow(v)}
</tbody></table><p>deadline ${e(limits.deadlineAt)}</p>`;
}

/** When a conversation entry was written, or nothing when the run's events no longer say. */
const atOf = (at: number | undefined) =>
  at === undefined
    ? ''
    : `<time class="at" datetime="${e(new Date(at).toISOString())}">${e(new Date(at).toISOString())}</time>`;

function message(m: JournalEntry, at: number | undefined): string {
  const t = atOf(at);
  switch (m.kind) {
    case 'decision':
      return `<li class="msg agent"><span class="who">agent · step ${e(m.step)}</span>${m.text !== undefined ? `<p>${e(m.text)}</p>` : ''}${m.final !== undefined ? `<p>${e(m.final)}</p>` : ''}${m.toolCalls.map((c) => `<div class="call"><code>${e(c.name)}</code><pre>${e(JSON.stringify(c.args, null, 2))}</pre></div>`).join('')}${t}</li>`;
    case 'observation':
      return `<li class="msg tool"><span class="who">${e(m.tool)} → ${e(m.status)}</span><pre>${e(JSON.stringify(m.output, null, 2))}</pre>${t}</li>`;
    case 'status':
      return `<li class="msg note">status <b>${e(m.status)}</b> ${e(m.reason)}${t}</li>`;
    case 'operator':
      return `<li class="msg operator"><span class="who">operator ${e(m.by)}</span> ${e(m.action)} ${m.actionId ? `<a href="#${e(m.actionId)}">${e(m.actionId)}</a>` : ''} → ${e(m.detail)}${t}</li>`;
  }
}

function approvalBlock(runId: string, a: PendingApproval, acts: boolean, csrf: string): string {
  const base = `${CONSOLE}/runs/${e(runId)}/approvals/${e(a.actionId)}`;
  return `<section class="pending approval" id="approval-${e(a.actionId)}">
<h2>Approval needed: <code>${e(a.tool)}</code></h2>
<p>Exactly this is approved (fingerprint <code class="fingerprint">${e(a.fingerprint)}</code>, expires ${e(new Date(a.expiresAt).toISOString())}):</p>
<pre class="approval-args">${e(JSON.stringify(a.args, null, 2))}</pre>
${
  acts
    ? `<form method="post" action="${base}" class="inline">${csrfField(csrf)}<input type="hidden" name="fingerprint" value="${e(a.fingerprint)}"><input type="hidden" name="decision" value="approve"><button class="approve">approve</button></form>
<form method="post" action="${base}" class="inline">${csrfField(csrf)}<input type="hidden" name="fingerprint" value="${e(a.fingerprint)}"><input type="hidden" name="decision" value="reject"><button class="reject danger">reject</button></form>`
    : ''
}
</section>`;
}

/**
 * A run parked for a version change: continue under one of the served versions, or cancel (the version queue's two
 * actions).
 */
function versionBlock(
  runId: string,
  vc: NonNullable<RunPageData['versionChange']>,
  acts: boolean,
  csrf: string,
): string {
  const base = `${CONSOLE}/runs/${e(runId)}/version`;
  const forms = vc.served
    .map(
      (s) =>
        `<form method="post" action="${base}/continue" class="inline">${csrfField(csrf)}<input type="hidden" name="agentVersion" value="${e(s.agentVersion)}"><input type="hidden" name="toolsHash" value="${e(s.toolsHash)}"><button class="approve continue-version">continue under ${e(s.label)}</button></form>`,
    )
    .join('\n');
  return `<section class="pending version-change" id="version-change">
<h2>Parked for a version change</h2>
<p>Pinned to <code id="version-pinned">${e(vc.pinned)}</code>; live workers serve: ${vc.served.length === 0 ? '<em id="version-served">none</em>' : `<span id="version-served">${vc.served.map((s) => `<code>${e(s.label)}</code>`).join(', ')}</span>`}.
Continuing re-pins the run and resumes it (recorded effects are not redone); cancelling ends it.</p>
${acts ? `${forms}\n<form method="post" action="${base}/cancel" class="inline">${csrfField(csrf)}<button class="reject danger" id="cancel-version">cancel run</button></form>` : ''}
</section>`;
}

function humanBlock(runId: string, h: HumanItem, acts: boolean, csrf: string): string {
  const history = h.history
    .map(
      (x) =>
        `<tr><td>${e(new Date(x.at).toISOString())}</td><td>${e(x.from ?? '')}</td><td>${e(x.to)}</td><td>${e(x.by)}</td><td>${e(x.why)}</td><td><pre>${x.evidence === undefined ? '' : e(JSON.stringify(x.evidence, null, 2))}</pre></td></tr>`,
    )
    .join('');
  return `<section class="pending human" id="human-${e(h.actionId)}">
<h2>A person must decide: <code>${e(h.tool)}</code> (${e(h.state)})</h2>
<p class="human-subject">ticket <code>${e(h.subject)}</code></p>
<p>The outcome of this request is unknown and the service could not settle it. Idempotency key <code>${e(h.idempotencyKey)}</code>.</p>
<pre>${e(JSON.stringify(h.args, null, 2))}</pre>
<table class="history"><thead><tr><th>at</th><th>from</th><th>to</th><th>by</th><th>why</th><th>evidence</th></tr></thead><tbody>${history}</tbody></table>
${
  acts
    ? `<form method="post" action="${CONSOLE}/runs/${e(runId)}/reconciliations/${e(h.actionId)}" class="resolve">${csrfField(csrf)}
<label><input type="radio" name="finding" value="confirmed" required> confirmed: the service has it, its id is <input name="receipt" class="receipt" placeholder="the service's id"></label>
<label><input type="radio" name="finding" value="not_sent"> not sent: send it once more with the same key</label>
<label><input type="radio" name="finding" value="compensate"> compensate: send a correcting action</label>
${h.compensationRefused ? `<label><input type="radio" name="finding" value="accept"> accept: its compensation was refused by its service; the effect stands, end the run without compensating it</label>\n` : ''}<label>what you checked <textarea name="note" maxlength="2000"></textarea></label>
<button class="resolve-submit">record finding</button></form>`
    : ''
}
</section>`;
}

export function errorPage(status: number, message: string, op?: Operator, csrf?: string): string {
  return layout(
    String(status),
    `<h1>${e(status)}</h1><p id="error">${e(message)}</p><p><a href="${CONSOLE}/runs">runs</a></p>`,
    op,
    csrf,
  );
}
