/** agentctl's defaults, read by its help and by `agent-fleet --help` (agentctl.ts runs its command when imported). */
export const DEFAULT_URL = 'http://127.0.0.1:3000';
/** How long one request waits for an answer (--timeout, AGENTCTL_TIMEOUT_MS). */
export const DEFAULT_TIMEOUT_MS = 10_000;
