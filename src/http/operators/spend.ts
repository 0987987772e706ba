/**
 * Spend for operators: GET /v1/spend?period=YYYY-MM-DD|YYYY-MM (default today, UTC): the real cost of every model
 * attempt of the day or month by tenant, agent and model, in µ$ (src/budget/spend.ts). A tenant-scoped operator
 * sees its own tenants' lines only. A malformed period, or a day or month not on the calendar, is 400 naming `period`.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator } from '../auth.js';
import { invalid } from '../../producer/fieldErrors.js';
import { readSpendReport } from '../../budget/spend.js';

/** A day or month that is on the calendar: `2026-99` or `2026-02-30` names no report, and is the caller's error. */
function onCalendar(period: string): boolean {
  const day = period.length === 7 ? `${period}-01` : period;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(ms) && ms >= 0 && new Date(ms).toISOString().slice(0, 10) === day;
}

export const spendQuerySchema = z.object({
  period: z
    .string()
    // abort: a period out of form is one error, not also "not on the calendar".
    .regex(/^\d{4}-\d{2}(-\d{2})?$/, { error: 'a UTC day YYYY-MM-DD or month YYYY-MM', abort: true })
    .refine(onCalendar, 'a UTC day YYYY-MM-DD or month YYYY-MM on the calendar, from 1970')
    .optional(),
});

/** Days the console's spend plot spans, today included. */
export const SPEND_PLOT_DAYS = 31;

/** Each tenant's settled spend per UTC day (µ$; undefined: no report that day) and this month, against the limits. */
export interface SpendSeries {
  /** The UTC days plotted, oldest first, today last. */
  days: string[];
  month: string;
  limits: { tenantDay: number; tenantMonth: number; fleetMonth: number };
  tenants: { tenant: string; daily: (number | undefined)[]; month: number }[];
  /** The fleet's spend this month (every tenant's, whoever reads it: the fleet's limit is on the whole). */
  fleetMonth: number;
}

/**
 * The spend plot's data, from the reports every settled attempt adds to (src/budget/spend.ts, the ones GET /v1/spend
 * reads): the day's report of each of the last `days` UTC days and this month's, summed by tenant. Every report key
 * shares the {spend} hash tag: one pipeline, one Cluster slot. A day whose report is gone (no spend that day, or past
 * the day reports' retention) has no value: the plot leaves a gap rather than draw a zero it does not know.
 * A tenant-scoped operator gets its own tenants only.
 */
export async function readSpendSeries(
  ctx: EngineContext,
  tenants: '*' | readonly string[],
  nowMs = Date.now(),
  days = SPEND_PLOT_DAYS,
): Promise<SpendSeries> {
  const dayNames = Array.from({ length: days }, (_, i) =>
    new Date(nowMs - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10),
  );
  const month = dayNames.at(-1)!.slice(0, 7);
  const pipe = ctx.redis.pipeline();
  for (const day of dayNames) pipe.hgetall(ctx.keys.spendReports(day, month).dayReport);
  pipe.hgetall(ctx.keys.spendReports(month, month).monthReport);
  const replies = ((await pipe.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return v as Record<string, string>;
  });
  const byTenant = (report: Record<string, string>) => {
    const out = new Map<string, number>();
    for (const [field, v] of Object.entries(report)) {
      const tenant = field.split(' ', 1)[0]!;
      out.set(tenant, (out.get(tenant) ?? 0) + Number(v));
    }
    return out;
  };
  const perDay = replies.slice(0, days).map(byTenant);
  const monthly = byTenant(replies[days]!);
  const seen = new Set([...monthly.keys(), ...perDay.flatMap((d) => [...d.keys()])]);
  const visible = [...seen].filter((t) => tenants === '*' || tenants.includes(t)).sort();
  const { cfg } = ctx;
  return {
    days: dayNames,
    month,
    limits: {
      tenantDay: cfg.TENANT_DAILY_COST,
      tenantMonth: cfg.TENANT_MONTHLY_COST,
      fleetMonth: cfg.FLEET_MONTHLY_COST,
    },
    tenants: visible.map((tenant) => ({
      tenant,
      // A day with a report and nothing of this tenant in it is a known zero.
      daily: perDay.map((d, i) => (Object.keys(replies[i]!).length > 0 ? (d.get(tenant) ?? 0) : undefined)),
      month: monthly.get(tenant) ?? 0,
    })),
    fleetMonth: [...monthly.values()].reduce((n, v) => n + v, 0),
  };
}

/** GET /v1/spend's answer (described in /openapi.json). */
export const spendReportSchema = z
  .object({
    period: z.string().meta({ description: 'The UTC day (YYYY-MM-DD) or month (YYYY-MM) reported.' }),
    currency: z.literal('USD'),
    unit: z.literal('micros').meta({ description: 'Every amount is in µ$ (1e-6 USD), a whole number.' }),
    totalMicros: z.number().int().nonnegative().meta({ description: "The lines' sum." }),
    lines: z.array(
      z.object({
        tenant: z.string(),
        agent: z.string(),
        model: z.string().meta({ description: '`provider/model`.' }),
        micros: z
          .number()
          .int()
          .nonnegative()
          .meta({ description: "The real cost of the period's model attempts, failed attempts included." }),
      }),
    ),
  })
  .meta({ id: 'SpendReport' });

export function spendRouter(ctx: EngineContext): Router {
  const r = Router();
  r.get('/v1/spend', requireOperator(ctx, 'viewer'), async (req, res) => {
    const q = spendQuerySchema.safeParse(req.query);
    if (!q.success) return void invalid(res, q.error);
    const period = q.data.period ?? new Date().toISOString().slice(0, 10);
    const report = await readSpendReport(ctx.redis, ctx.keys, period);
    const op = operatorOf(res);
    if (op.tenants === '*') return res.json(report);
    const mine = new Set(op.tenants);
    const lines = report.lines.filter((l) => mine.has(l.tenant));
    return res.json({ ...report, lines, totalMicros: lines.reduce((n, l) => n + l.micros, 0) });
  });
  return r;
}
