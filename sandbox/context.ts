/**
 * The mutable state a sandbox request works against. `store` is replaced on
 * reset, so handlers read it once at the start and keep that reference.
 */
import type { FaultPlan } from './faults.js';
import type { Store } from './store.js';

export interface SandboxContext {
  store: Store;
  readonly faults: FaultPlan;
  readonly delays: Delays;
}

/**
 * Timers for slow_commit. close() cancels them: a pending slow commit then
 * never happens and its request never answers (the server is going away).
 */
export class Delays {
  private readonly pending = new Set<NodeJS.Timeout>();

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.pending.delete(t);
        resolve();
      }, ms);
      this.pending.add(t);
    });
  }

  /** Requests held by a slow_commit now: received, their commit (or read) not yet made. */
  get held(): number {
    return this.pending.size;
  }

  cancelAll(): void {
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
  }
}
