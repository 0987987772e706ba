/**
 * `durable-agent-fleet/fleet`: what an operator embedding the fleet imports. `createFleet` starts the same
 * components as the stock processes (the API, a worker, the reconciler) in one process, over one configuration read
 * like the environment (`loadConfig`: every setting is documented in docs/configuration.md, a bad one fails naming
 * the field). The engine's machinery stays inside: a fleet is started and stopped, never reached into.
 *
 * @example
 * ```ts
 * import { createFleet } from 'durable-agent-fleet/fleet';
 * import agents from './agents.js';
 *
 * const fleet = await createFleet({ agents, config: process.env });
 * const { url } = await fleet.api.listen(8080);
 * fleet.worker.start();
 * fleet.reconciler.start();
 * process.once('SIGTERM', () => void fleet.close()); // the worker hands its held steps back first
 * ```
 */
export { createFleet, type Fleet, type FleetOptions, type Started } from './server/fleet.js';
export { loadConfig, type Config } from './config/config.js';
