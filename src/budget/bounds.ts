/**
 * Hard upper bounds of a run's budget numbers. The API's request schema, the stored run
 * spec the worker parses and the configuration's LIMIT_* / DEFAULT_* all derive from
 * these, so nothing the API accepts can make a spec the worker cannot parse (a deadline
 * past what a Date or a safe integer holds). A deployment lowers them with LIMIT_*.
 */
export const BUDGET_BOUNDS = {
  maxSteps: 10_000,
  maxTokens: 1_000_000_000,
  /** 30 days. */
  maxWallMs: 30 * 24 * 3600_000,
} as const;

/** Tokens one scripted turn may report (a script is accepted by the API). */
export const SCRIPT_USAGE_MAX_TOKENS = BUDGET_BOUNDS.maxTokens;
