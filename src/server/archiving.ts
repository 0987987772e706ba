/**
 * The archiver of a process that sweeps (the reconciler, an embedded fleet's reconciler, the demo): present only
 * with an archive (ARCHIVE_URL). A run's copy carries the same view GET /v1/runs/:id serves.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { ledgerFor } from '../ledger/ledger.js';
import { runView } from '../http/runView.js';
import { Archiver } from '../archive/archiver.js';

export function archiverFor(ctx: EngineContext, id?: string): Archiver | undefined {
  if (!ctx.archive) return undefined;
  const ledger = ledgerFor(ctx);
  return new Archiver(ctx, ctx.archive.pool, (runId) => runView(ctx, runId, (r) => ledger.listForRun(r)), id);
}
