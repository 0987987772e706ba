/**
 * Fault rules and the seeded PRNG that decides whether a probabilistic rule
 * fires, so a chaos run with the same seed and the same request order
 * injects the same faults.
 *
 * A request asks for the kinds that can happen at its current stage
 * (`fire(resource, kinds)`); rules are checked in order, the first matching
 * rule that fires wins and uses up one of its `count`. A spent rule is
 * skipped. The PRNG is drawn only for rules with probability < 1.
 */
import { EFFECT_RESOURCES, faultRuleSchema, type FaultKind, type FaultRule } from './types.js';

/** mulberry32: tiny, fast, good enough for fault dice; same seed -> same stream. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ActiveRule {
  rule: FaultRule;
  remaining: number;
}

const ALL_EFFECTS: readonly string[] = EFFECT_RESOURCES;

export class FaultPlan {
  private rules: ActiveRule[] = [];
  private rng: () => number;

  constructor(private readonly seed: number) {
    this.rng = mulberry32(seed);
  }

  /** Replace the rules. Throws a ZodError on a malformed rule (a caller bug, not a runtime condition). */
  set(rules: readonly FaultRule[]): void {
    this.rules = parse(rules);
  }

  add(rules: readonly FaultRule[]): void {
    this.rules.push(...parse(rules));
  }

  /** Number of rules held, spent ones included. */
  get size(): number {
    return this.rules.length;
  }

  clear(): void {
    this.rules = [];
  }

  /** Clear the rules and restart the PRNG from the seed, so a reset run replays the same dice. */
  reset(): void {
    this.rules = [];
    this.rng = mulberry32(this.seed);
  }

  /** The first rule of one of `kinds` that matches `resource` and fires, or undefined. */
  fire(resource: string, kinds: readonly FaultKind[]): FaultRule | undefined {
    for (const active of this.rules) {
      const { rule } = active;
      if (active.remaining <= 0 || !kinds.includes(rule.kind)) continue;
      if (rule.resource === undefined ? !ALL_EFFECTS.includes(resource) : rule.resource !== resource) continue;
      const p = rule.probability ?? 1;
      if (p < 1 && !(this.rng() < p)) continue;
      active.remaining -= 1;
      return rule;
    }
    return undefined;
  }
}

function parse(rules: readonly FaultRule[]): ActiveRule[] {
  return rules.map((r) => {
    const rule = faultRuleSchema.parse(r);
    return { rule, remaining: rule.count ?? Number.POSITIVE_INFINITY };
  });
}
