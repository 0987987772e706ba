/**
 * The console's spend page: per tenant, its settled model spend of each of the last days (UTC) plotted against the
 * tenant's daily money limit, with this month's spend against the monthly one; the fleet's month against its limit.
 * Server-rendered SVG like the flow page's rate plots (no script, no inline style: the Content-Security-Policy
 * forbids both; presentation attributes only). Data: src/http/operators/spend.ts readSpendSeries.
 */
import { formatMicros } from '../../core/prices.js';
import { escapeHtml as e } from '../runView.js';
import type { Operator } from '../operatorIdentity.js';
import type { SpendSeries } from '../operators/spend.js';
import { layout } from './pages.js';

const W = 600;
const H = 160;
const PAD = 30;

/** "$1.234567 of $5.000000", or "no limit" when the limit is 0. */
const against = (micros: number, limit: number) =>
  `$${formatMicros(micros)} ${limit > 0 ? `of $${formatMicros(limit)}` : '(no limit)'}`;

/**
 * One tenant's plot: each day's spend (a polyline per run of days with a report; a day without one is a gap) and the
 * daily limit (dashed), both on one scale.
 */
export function spendPlot(
  tenant: string,
  days: readonly string[],
  daily: readonly (number | undefined)[],
  limit: number,
): string {
  const known = daily.filter((v): v is number => v !== undefined);
  const top = Math.max(limit, ...known, 1) * 1.1;
  const x = (i: number) => PAD + (i * (W - 2 * PAD)) / Math.max(1, days.length - 1);
  const y = (v: number) => H - PAD - (v * (H - 2 * PAD)) / top;
  const runs: string[][] = [];
  let open: string[] | undefined;
  daily.forEach((v, i) => {
    if (v === undefined) return void (open = undefined);
    if (!open) runs.push((open = []));
    open.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  });
  const lines = runs
    .map((pts) =>
      pts.length === 1
        ? `<circle class="spent" cx="${pts[0]!.split(',')[0]}" cy="${pts[0]!.split(',')[1]}" r="2.5" fill="#036"/>`
        : `<polyline class="spent" points="${pts.join(' ')}" fill="none" stroke="#036" stroke-width="2"/>`,
    )
    .join('\n');
  const limitY = y(limit).toFixed(1);
  const limitLine =
    limit > 0
      ? `<line class="limit" x1="${PAD}" x2="${W - PAD}" y1="${limitY}" y2="${limitY}" stroke="#c00" stroke-dasharray="6 4"/>
<text x="${W - PAD}" y="${Number(limitY) - 4}" text-anchor="end" font-size="11" fill="#c00">daily limit $${e(formatMicros(limit))}</text>`
      : '';
  const label = `${tenant}: spend per UTC day from ${days[0]} to ${days.at(-1)}${limit > 0 ? ` against the daily limit of $${formatMicros(limit)}` : ''}`;
  return `<svg class="spend-plot" role="img" aria-label="${e(label)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<rect x="${PAD}" y="${PAD}" width="${W - 2 * PAD}" height="${H - 2 * PAD}" fill="none" stroke="#ccc"/>
${limitLine}
${lines}
<text x="${PAD}" y="${H - 8}" font-size="11">${e(days[0] ?? '')}</text><text x="${W - PAD}" y="${H - 8}" font-size="11" text-anchor="end">${e(days.at(-1) ?? '')}</text>
</svg>`;
}

export function spendPage(op: Operator, s: SpendSeries): string {
  const today = (d: readonly (number | undefined)[]) => d.at(-1) ?? 0;
  const rows = s.tenants
    .map(
      (t) =>
        `<tr data-tenant="${e(t.tenant)}"><td>${e(t.tenant)}</td><td class="today">${e(against(today(t.daily), s.limits.tenantDay))}</td><td class="month">${e(against(t.month, s.limits.tenantMonth))}</td></tr>`,
    )
    .join('\n');
  const plots = s.tenants
    .map(
      (t) =>
        `<section class="spend" data-tenant="${e(t.tenant)}"><h3>${e(t.tenant)}</h3>${spendPlot(t.tenant, s.days, t.daily, s.limits.tenantDay)}</section>`,
    )
    .join('\n');
  const fleet =
    op.tenants === '*'
      ? `<p id="fleet-month">fleet this month (${e(s.month)}): ${e(against(s.fleetMonth, s.limits.fleetMonth))}</p>`
      : '';
  const body = `<h1>Spend</h1>
<p>Settled model spend in USD (each attempt's real cost, failed attempts included), by UTC day. A day without a report (no spend, or past the day reports' retention) is a gap.</p>
${fleet}
<table id="spend-tenants"><thead><tr><th>tenant</th><th>today / daily limit</th><th>this month / monthly limit</th></tr></thead>
<tbody>${rows || '<tr><td colspan="3">no spend recorded</td></tr>'}</tbody></table>
${plots}`;
  return layout('spend', body, op);
}
