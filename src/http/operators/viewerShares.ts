/**
 * Who may open one more live event stream in this process. One tenant token
 * once opened 1,000 streams on its own run and took every slot of
 * SSE_MAX_VIEWERS: every other tenant and every operator got 503 and the
 * console's live updates stopped. So each principal (a tenant, the producer,
 * an operator by name) holds at most SSE_MAX_VIEWERS_PER_PRINCIPAL streams,
 * and everyone but operators shares SSE_MAX_VIEWERS - SSE_OPERATOR_RESERVE:
 * the reserve is left for operators whatever the tenants do. A refusal names
 * the limit it hit by its setting. Admission is synchronous, so a cap is exact.
 */
import type { Principal } from '../auth.js';

/** The setting a refused viewer hit, named as in the configuration. */
export type ViewerLimit = 'SSE_MAX_VIEWERS_PER_PRINCIPAL' | 'SSE_OPERATOR_RESERVE' | 'SSE_MAX_VIEWERS';

export interface ViewerShareLimits {
  /** Live streams of the whole process. */
  maxViewers: number;
  /** Live streams of one principal. */
  perPrincipal: number;
  /** Streams of maxViewers that only operators may take. */
  operatorReserve: number;
}

/** The bounded kind of a principal, for metrics (never a tenant or operator name). */
export type PrincipalKind = Principal['role'];

/** A viewer's slot: release it once, when its response closes. */
export interface ViewerSlot {
  release(): void;
}

/** One key per principal: a tenant's token, the producer, an operator by name (bearer, JWT or console session). */
export function principalKey(p: Principal): string {
  if (p.role === 'tenant') return `tenant:${p.tenant}`;
  if (p.role === 'operator') return `operator:${p.operator.name}`;
  return 'producer';
}

export class ViewerShares {
  private total = 0;
  private others = 0;
  private readonly byPrincipal = new Map<string, number>();

  constructor(readonly limits: ViewerShareLimits) {}

  /** Live viewers now. */
  get viewers(): number {
    return this.total;
  }

  /** Live viewers of one principal now. */
  heldBy(p: Principal): number {
    return this.byPrincipal.get(principalKey(p)) ?? 0;
  }

  /**
   * The limit a new viewer of `p` would pass, if any; the most specific first, so a tenant learns it took its share.
   */
  refusal(p: Principal): ViewerLimit | undefined {
    if (this.heldBy(p) >= this.limits.perPrincipal) return 'SSE_MAX_VIEWERS_PER_PRINCIPAL';
    if (p.role !== 'operator' && this.others >= this.limits.maxViewers - this.limits.operatorReserve)
      return 'SSE_OPERATOR_RESERVE';
    if (this.total >= this.limits.maxViewers) return 'SSE_MAX_VIEWERS';
    return undefined;
  }

  /** Takes a slot for `p`, or names the limit that refuses it. */
  admit(p: Principal): ViewerSlot | ViewerLimit {
    const refused = this.refusal(p);
    if (refused !== undefined) return refused;
    const key = principalKey(p);
    const operator = p.role === 'operator';
    this.total++;
    if (!operator) this.others++;
    this.byPrincipal.set(key, (this.byPrincipal.get(key) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        if (!operator) this.others--;
        const left = (this.byPrincipal.get(key) ?? 1) - 1;
        if (left > 0) this.byPrincipal.set(key, left);
        else this.byPrincipal.delete(key);
      },
    };
  }
}
