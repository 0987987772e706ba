/**
 * A service's outright refusal of a write (a 4xx, `invalid_input`: no effect), told alike wherever it is met: a
 * step's request (src/ledger/runner.ts, the action settled and the model told `rejected`) and a same-key replay of
 * the reconciler (src/ledger/reconcile.ts, the action to a person). Logged `service_rejected` with the HTTP status
 * and the vendor's error code, never the request or customer text, and counted in
 * agent_service_rejections_total{tool,status}: a 401/403 is the service refusing our credentials, every write to it
 * refused alike (alert AgentServiceCredentialsRefused).
 */
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';

export function tellServiceRejection(
  d: { metrics: Pick<Metrics, 'serviceRejections'>; log: Logger },
  tool: string,
  details: unknown,
  message: string,
): void {
  const { status, code } = (details ?? {}) as { status?: unknown; code?: unknown };
  const httpStatus = typeof status === 'number' ? String(status) : 'none';
  d.metrics.serviceRejections.inc({ tool, status: httpStatus });
  d.log.warn(
    { code: 'service_rejected', status: httpStatus, vendorCode: typeof code === 'string' ? code : undefined },
    message,
  );
}
