/**
 * A tenant's weight in flow control's turns (src/flow/admission.ts): how many turns it gets to a tenant of weight 1.
 * One bound for every way a weight comes in (FLOW_TENANT_WEIGHTS, PUT /v1/flow/tenants/:tenant, agentctl), and
 * the scale of the turns' integer arithmetic (src/store/lua/includes/flowTurns.lua).
 *
 * Each admission moves its tenant's pass on by a stride of STRIDE_SCALE / weight, rounded to a whole number: from
 * 1,000 (weight 1000) to 10^9 (weight 0.001). Whole numbers add exactly in Lua's doubles up to 2^53, and the
 * script moves every pass back down long before that, so a turn is never lost to rounding: a weight of 1e-300
 * once made each stride 1e300, past which adding another tenant's stride of 1 changed nothing and the turns fell
 * back to alphabetical order.
 */
export const FLOW_WEIGHT_MIN = 0.001;
export const FLOW_WEIGHT_MAX = 1000;
/** A weight's stride is this over the weight (the scripts hold the same number). */
export const FLOW_STRIDE_SCALE = 1_000_000;

/** Why a weight is refused, or undefined. */
export function flowWeightProblem(weight: number): string | undefined {
  return Number.isFinite(weight) && weight >= FLOW_WEIGHT_MIN && weight <= FLOW_WEIGHT_MAX
    ? undefined
    : `weight: a number from ${FLOW_WEIGHT_MIN} to ${FLOW_WEIGHT_MAX}`;
}
