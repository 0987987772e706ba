/**
 * A new run refused because its tenant's line is full (flow control, FLOW_TENANT_MAX_WAITING): 429 with Retry-After on
 * every route that creates runs (POST /v1/runs, the signed webhooks), answered where the store's refusals are. Nothing
 * was written: asking again after the Retry-After is safe (intake is idempotent by its event), and the same intake of a
 * run already in line is answered as before, whatever the line holds now.
 */
import type { Response } from 'express';
import { LINE_FULL_RETRY_AFTER_S, TenantLineFull } from '../flow/admission.js';

/** Answers 429 `tenant_line_full` (true) when `err` is that refusal. */
export function lineFullAnswered(err: unknown, res: Response): boolean {
  if (!(err instanceof TenantLineFull) || res.headersSent) return false;
  res
    .status(429)
    .setHeader('retry-after', String(LINE_FULL_RETRY_AFTER_S))
    .json({
      error: 'tenant_line_full',
      tenant: err.tenant,
      limit: err.limit,
      message: `the tenant's line already holds ${err.limit} runs waiting to start (FLOW_TENANT_MAX_WAITING): nothing was written; retry after the Retry-After seconds`,
    });
  return true;
}
