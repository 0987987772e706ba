/** The admission script's arguments for the flow tests that call it themselves. */
import type { AdmitArgs } from '../../src/store/calls/flowAdmit.js';

/** Now, as owner 1, weight 1, no limit and no configured weight, but for `over`. */
export const admitArgs = (over: Partial<AdmitArgs> = {}): AdmitArgs => ({
  now: Date.now(),
  max: 1,
  owner: '1',
  defaultWeight: 1,
  tenantLimit: 0,
  agentLimit: 0,
  fleetLimit: 0,
  configured: {},
  ...over,
});
