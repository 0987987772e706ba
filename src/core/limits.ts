/**
 * The budget's words: a run's limits are what it may spend (steps, tokens, wall clock),
 * its usage what it has spent, and a stop what ends it when usage meets a limit
 * (src/budget/policy.ts compares them).
 *
 * The hard limits: the most any run's limits may be. The API's request schema, the stored
 * run spec the worker parses and the configuration's LIMIT_* / DEFAULT_* all derive from
 * these, so nothing the API accepts can make a spec the worker cannot parse (a deadline
 * past what a Date or a safe integer holds). A deployment lowers them with LIMIT_*.
 */
export const HARD_LIMITS = {
  maxSteps: 10_000,
  maxTokens: 1_000_000_000,
  /** 30 days. */
  maxWallMs: 30 * 24 * 3600_000,
  /** µ$ (1e-6 USD): $1,000,000,000, far inside a safe integer. */
  maxCost: 1e15,
} as const;

/** Tokens one scripted turn may report (a script is accepted by the API). */
export const SCRIPT_USAGE_MAX_TOKENS = HARD_LIMITS.maxTokens;
