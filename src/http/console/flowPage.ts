/**
 * The console's flow control page: each tenant's line (waiting, oldest wait, at work against its
 * limit, weight and share of the turns), the agents' slots, the latest changes with who made them,
 * and per model rate limit a plot of its token rate over the last minutes against its limit (a
 * tenant-scoped operator's page: no share, agents or fleet, which count other tenants' runs), drawn
 * as server-rendered SVG (no script, no inline style: the Content-Security-Policy forbids both;
 * presentation attributes only). Hand-written because the plot is two polylines and an axis, which
 * a charting library would render in the browser with a script the CSP refuses.
 */
import { escapeHtml as e } from '../runView.js';
import type { Operator } from '../operatorIdentity.js';
import type { FlowView, RateSeries, ScopedFlowView } from '../../flow/view.js';
import { layout } from './pages.js';

const W = 600;
const H = 160;
const PAD = 30;

/** One rate limit's plot: tokens per minute (polyline) and the limit (dashed line), both on one scale. */
export function ratePlot(r: RateSeries): string {
  const points = r.tokensPerMinute;
  const top = Math.max(r.tpm, ...points.map((p) => p.value), 1) * 1.1;
  const x = (i: number) => PAD + (i * (W - 2 * PAD)) / Math.max(1, points.length - 1);
  const y = (v: number) => H - PAD - (v * (H - 2 * PAD)) / top;
  const line = points.map((p, i) => `${x(i).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ');
  const limitY = y(r.tpm).toFixed(1);
  const spanMin = ((points.length * 5) / 60).toFixed(0);
  return `<svg class="rate-plot" role="img" aria-label="${e(r.bucket)}: tokens per minute against the limit of ${r.tpm}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<rect x="${PAD}" y="${PAD}" width="${W - 2 * PAD}" height="${H - 2 * PAD}" fill="none" stroke="#ccc"/>
<line class="limit" x1="${PAD}" x2="${W - PAD}" y1="${limitY}" y2="${limitY}" stroke="#c00" stroke-dasharray="6 4"/>
<text x="${W - PAD}" y="${Number(limitY) - 4}" text-anchor="end" font-size="11" fill="#c00">limit ${r.tpm} tokens/min</text>
<polyline class="used" points="${line}" fill="none" stroke="#036" stroke-width="2"/>
<text x="${PAD}" y="${H - 8}" font-size="11">−${spanMin} min</text><text x="${W - PAD}" y="${H - 8}" font-size="11" text-anchor="end">now</text>
</svg>`;
}

export function flowPage(op: Operator, v: FlowView | ScopedFlowView): string {
  const pct = (n: number) => `${(n * 100).toFixed(0)} %`;
  // Only an operator of every tenant is given the share, the agents and the fleet (flowViewFor).
  const whole = 'fleet' in v ? v : undefined;
  const tenants = v.tenants
    .map(
      (
        t,
      ) => `<tr data-tenant="${e(t.tenant)}"><td>${e(t.tenant)}</td><td class="waiting">${t.waiting} / ${t.maxWaiting === 0 ? '∞' : t.maxWaiting}</td><td>${(t.oldestWaitingMs / 1000).toFixed(1)} s</td>
<td class="held">${t.held} / ${t.limit === 0 ? '∞' : t.limit}</td><td>${t.weight}</td>${'share' in t ? `<td class="share">${pct(t.share)}</td>` : ''}<td>${t.admitted}</td></tr>`,
    )
    .join('\n');
  const agents = (whole?.agents ?? [])
    .map((a) => `<tr><td>${e(a.agent)}</td><td>${a.held} / ${a.limit === 0 ? '∞' : a.limit}</td></tr>`)
    .join('\n');
  const changes = v.changes
    .map(
      (c) =>
        `<li>${new Date(c.at).toISOString()} <b>${e(c.who)}</b> set ${e(c.what)} of ${e(c.of)}: ${e(c.from || 'default')} → ${e(c.to || 'default')}</li>`,
    )
    .join('\n');
  const rates = v.rates
    .map(
      (r) =>
        `<section class="rate" data-bucket="${e(r.bucket)}"><h3>${e(r.bucket)} <small>${r.rpm} requests/min, ${r.tpm} tokens/min</small></h3>${ratePlot(r)}</section>`,
    )
    .join('\n');
  const state = v.enabled ? 'on' : 'off (FLOW_CONTROL=false): runs start at once';
  const fleet = whole
    ? ` · <span id="fleet-held">fleet ${whole.fleet.held} at work${whole.fleet.limit > 0 ? ` of ${whole.fleet.limit}` : ''}</span>`
    : '';
  const columns = `<th>tenant</th><th>waiting / most</th><th>oldest wait</th><th>at work / limit</th><th>weight</th>${whole ? '<th>share</th>' : ''}<th>admitted</th>`;
  const agentSection = whole
    ? `<h2>Agents</h2><table id="agents"><thead><tr><th>agent</th><th>at work / limit</th></tr></thead><tbody>${agents}</tbody></table>`
    : '';
  const body = `<h1>Flow control</h1>
<p id="flow-state">${state}${fleet}</p>
<h2>Tenants</h2>
<table id="tenants"><thead><tr>${columns}</tr></thead>
<tbody>${tenants || `<tr><td colspan="${whole ? 7 : 6}">no tenant has runs in flow control</td></tr>`}</tbody></table>
${agentSection}
<h2>Model rate limits</h2>${rates || '<p>none configured (MODEL_RATE_LIMITS)</p>'}
<h2>Changes</h2><ul id="changes">${changes || '<li>none</li>'}</ul>`;
  return layout('flow control', body, op);
}
