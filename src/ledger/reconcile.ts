/**
 * Reconcile before retry (seed 003). An action in `outcome_unknown` may have
 * happened. Ask the authoritative service:
 *  - found: confirmed, with its receipt;
 *  - still processing: wait and ask again, until the deadline (and, in a step,
 *    never past the run's deadline plus its margin: `notAfter`);
 *  - proven absent AND proven stopped: safe_retry (same key), unless the action
 *    has used its dispatch attempts, then a person decides;
 *  - no lookup, or undecidable by the deadline: needs_human.
 * "Not found" alone is never "not sent".
 */
import { abortableSleep } from '../core/retry.js';
import type { LookupResult, ToolContext, WriteTool } from '../core/tool.js';
import { DeadlineError, withDeadline } from '../core/timeout.js';
import type { Metrics } from '../metrics/metrics.js';
import { Ledger, LedgerConflict, type ActionRecord } from './ledger.js';

export const MAX_DISPATCH_ATTEMPTS = 3;

export interface ReconcileDeps {
  ledger: Ledger;
  metrics: Metrics;
  deadlineMs: number;
  pollMs: number;
  /** Epoch ms: no lookup or wait past it (a step's run deadline plus DEADLINE_MARGIN_MS); unset for the sweeper. */
  notAfter?: number;
  now?: () => number;
}

export type ReconcileOutcome = 'confirmed' | 'safe_retry' | 'needs_human' | 'moved';

export async function reconcile(
  d: ReconcileDeps, rec: ActionRecord, tool: WriteTool, ctx: ToolContext, by: string,
): Promise<ReconcileOutcome> {
  const now = d.now ?? Date.now;
  const move = async (to: 'confirmed' | 'safe_retry' | 'needs_human', why: string, evidence: unknown, set: Record<string, string> = {}) => {
    try {
      await d.ledger.transition(rec.runId, rec.actionId, 'outcome_unknown', to, { by, why, evidence }, set);
      d.metrics.effects.inc({ tool: rec.tool, state: to });
      return to;
    } catch (err) {
      if (err instanceof LedgerConflict) return 'moved' as const;
      throw err;
    }
  };
  if (tool.service.lookup === 'none') {
    return move('needs_human', 'the service offers no lookup: the outcome cannot be decided automatically', { lookup: 'none' });
  }
  const runBound = d.notAfter !== undefined && d.notAfter < now() + d.deadlineMs;
  const deadline = runBound ? d.notAfter! : now() + d.deadlineMs;
  const undecided = runBound ? "outcome still undecidable at the run's deadline" : `outcome still undecidable after ${d.deadlineMs} ms`;
  let last: unknown;
  for (;;) {
    const query = (signal: AbortSignal) => tool.lookup(ctx, { idempotencyKey: rec.idempotencyKey, requestId: rec.requestId, signal });
    let r: LookupResult;
    try {
      r = d.notAfter === undefined ? await query(ctx.signal) : await withDeadline(d.notAfter, ctx.signal, query, now);
    } catch (err) {
      if (!(err instanceof DeadlineError)) throw err;
      return move('needs_human', undecided, { last: last ?? null, deadline: new Date(d.notAfter!).toISOString() });
    }
    last = r.evidence;
    if (r.status === 'committed') {
      // The service holds more than one effect for this one action: loud, whatever happens next.
      if (r.effects !== undefined && r.effects > 1) d.metrics.duplicateWrites.inc({ tool: rec.tool }, r.effects - 1);
      return move('confirmed', 'the service has the request: receipt recovered by lookup', r.evidence, {
        receipt: r.receipt, output: JSON.stringify(r.output),
      });
    }
    if (r.status === 'absent_stopped') {
      if (rec.attempts >= MAX_DISPATCH_ATTEMPTS) {
        return move('needs_human', `proven not sent, but ${rec.attempts} dispatches already failed`, r.evidence);
      }
      return move('safe_retry', 'the service proves no effect and no request in flight', r.evidence);
    }
    if (now() >= deadline) {
      return move('needs_human', undecided, { last });
    }
    await abortableSleep(Math.min(d.pollMs, deadline - now()), ctx.signal);
  }
}
