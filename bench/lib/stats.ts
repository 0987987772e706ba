/** Small statistics helpers (no dependencies). */

export function median(xs: readonly number[]): number {
  return quantile(xs, 0.5);
}

/** Linear-interpolated quantile (q in [0,1]); NaN for an empty sample. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = s[lo]!;
  const b = s[hi]!;
  return a + (b - a) * (pos - lo);
}

export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}

export interface Dist {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function dist(xs: readonly number[]): Dist {
  return {
    n: xs.length,
    mean: mean(xs),
    p50: quantile(xs, 0.5),
    p90: quantile(xs, 0.9),
    p99: quantile(xs, 0.99),
    max: xs.length ? Math.max(...xs) : Number.NaN,
  };
}

/** Rounds for display/JSON: 3 significant decimals below 10, fewer above. */
export function round(x: number, digits?: number): number {
  if (!Number.isFinite(x)) return x;
  const d = digits ?? (Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : Math.abs(x) >= 1 ? 2 : 3);
  const f = 10 ** d;
  return Math.round(x * f) / f;
}

export const nowMs = (): number => performance.timeOrigin + performance.now();
