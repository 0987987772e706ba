/**
 * The HTML of following a ticket (src/http/console/ticket.ts): the subject's chain of runs, the run tree, and the
 * run's timeline as a server-rendered SVG (no script: the Content-Security-Policy forbids inline ones). Every value
 * from a run goes through escapeHtml.
 */
import { escapeHtml as e } from '../runView.js';
import type { RunRow } from '../../runs/list.js';
import type { Bar, TreeNode } from './ticket.js';

const CONSOLE = '/console';
const link = (id: string) => `<a href="${CONSOLE}/runs/${e(id)}">${e(id)}</a>`;

/** The search fields of a row, `name: value` each (listing cells, chain rows). */
export function searchCell(r: Pick<RunRow, 'search'>): string {
  return Object.entries(r.search ?? {})
    .map(([k, v]) => `<span class="search-field" data-field="${e(k)}">${e(k)}: ${e(v)}</span>`)
    .join(' ');
}

/** The subject's runs, oldest first, this one marked, with its previous and next runs linked. */
export function chainBlock(
  runId: string,
  subject: string,
  chain: RunRow[],
  prev: string | undefined,
  next: string | undefined,
): string {
  const rows = chain
    .map(
      (r, i) =>
        `<tr data-run="${e(r.runId)}"${r.runId === runId ? ' class="current" aria-current="true"' : ''}><td>${i + 1}</td><td>${r.runId === runId ? `<b>${e(r.runId)}</b>` : link(r.runId)}</td><td><span class="status" data-status="${e(r.status)}">${e(r.status)}</span></td><td>${e(new Date(r.createdAt).toISOString())}</td><td>${e(r.reason)}</td></tr>`,
    )
    .join('\n');
  return `<section id="ticket-chain"><h2>Ticket <code id="subject">${e(subject)}</code>: every run</h2>
<p class="chain-nav">${prev ? `<a id="previous-run" href="${CONSOLE}/runs/${e(prev)}">← previous run</a>` : '<span>first run</span>'} · ${next ? `<a id="next-run" href="${CONSOLE}/runs/${e(next)}">next run →</a>` : '<span>latest run</span>'} · <a id="subject-search" href="${CONSOLE}/runs?${e(new URLSearchParams({ subject }).toString())}">search this ticket</a></p>
<table id="chain"><thead><tr><th>#</th><th>run</th><th>status</th><th>created</th><th>reason</th></tr></thead><tbody>
${rows}
</tbody></table></section>`;
}

/** The run tree: the parent (when this run is a child), this run, its children nested under it. */
export function treeBlock(parentRunId: string | undefined, root: TreeNode): string {
  if (!parentRunId && root.children.length === 0) return '';
  const node = (n: TreeNode, top: boolean): string =>
    `<li data-run="${e(n.runId)}">${top ? `<b>${e(n.runId)}</b> (this run)` : link(n.runId)} <span class="status" data-status="${e(n.status)}">${e(n.status || 'not created')}</span>${n.children.length ? `<ul>${n.children.map((c) => node(c, false)).join('')}</ul>` : ''}</li>`;
  const inner = `<ul class="tree">${node(root, true)}</ul>`;
  return `<section id="run-tree"><h2>Run tree</h2>
${parentRunId ? `<ul class="tree"><li id="tree-parent">parent ${link(parentRunId)}${inner}</li></ul>` : inner}
</section>`;
}

const ROW_H = 16;
const LABEL_W = 170;
const WIDTH = 900;

/** The steps as bars on one time axis (ms from the first event), a row per bar. */
export function timelineSvg(bars: Bar[]): string {
  if (bars.length === 0) return '<section id="timeline"><h2>Timeline</h2><p>no steps recorded</p></section>';
  const t0 = Math.min(...bars.map((b) => b.from));
  const t1 = Math.max(...bars.map((b) => b.to), t0 + 1);
  const span = t1 - t0;
  const plot = WIDTH - LABEL_W - 10;
  const x = (t: number) => LABEL_W + ((t - t0) / span) * plot;
  const height = (bars.length + 2) * ROW_H;
  const rows = bars
    .map((b, i) => {
      const y = (i + 1) * ROW_H;
      const w = Math.max(2, x(b.to) - x(b.from));
      return `<g class="bar ${b.kind}" data-kind="${b.kind}" data-step="${b.step}"><title>${e(b.label)}: ${b.to - b.from} ms</title><text x="4" y="${y + 11}">${e(b.label)}</text><rect x="${x(b.from).toFixed(1)}" y="${y + 2}" width="${w.toFixed(1)}" height="${ROW_H - 4}"></rect></g>`;
    })
    .join('\n');
  const axisY = (bars.length + 1) * ROW_H + 12;
  const ticks = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (f) => `<text class="tick" x="${(LABEL_W + f * plot).toFixed(1)}" y="${axisY}">${Math.round(f * span)} ms</text>`,
    )
    .join('');
  return `<section id="timeline"><h2>Timeline</h2>
<svg id="timeline-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" role="img" aria-label="the run's steps on one time axis">
<text class="legend" x="4" y="11">from ${e(new Date(t0).toISOString())}: model call, tools, commit, waits</text>
${rows}
${ticks}
</svg></section>`;
}
