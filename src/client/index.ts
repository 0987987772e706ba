/**
 * durable-agent-fleet/client: the HTTP API for producers and operators (docs/client.md). It imports no Redis, BullMQ
 * or worker code: its types come from the API's own schemas, beside two leaf modules (the run statuses, the webhook
 * signature), and it runs wherever fetch does.
 *
 * @example
 * import { FleetClient, Conflict } from 'durable-agent-fleet/client';
 * const fleet = new FleetClient({ url: process.env.FLEET_URL!, token: process.env.PRODUCER_TOKEN });
 * const { runId } = await fleet.createRun({ tenant: 'acme', agent: 'support', input: { ticket } });
 */
export * from './client.js';
export * from './errors.js';
export { parseSse } from './events.js';
export type { RetryOptions, TransportOptions } from './transport.js';
export { signWebhook, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './webhooks.js';
