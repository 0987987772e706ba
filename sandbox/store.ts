/**
 * In-memory records and Idempotency-Key state of the sandbox, per effect
 * resource (Zendesk tickets, Resend emails, Stripe refunds).
 *
 * `admit` is the atomic step: it checks the key and, for a new key, registers
 * it as in progress in the same synchronous call, so two concurrent POSTs with
 * one key can never both commit (the second sees in_progress or a replay).
 * A key is kept for its vendor's window (sandbox clock, `advance()` moves it):
 * past it the key is forgotten and the same request is processed again, as
 * the vendors document, which the counts show as a second effect for that key.
 * A reset replaces the whole Store; a request still holding the old one
 * commits into it and the effect is invisible afterwards, as intended.
 */
import {
  DEFAULT_KEY_WINDOW_MS,
  EFFECT_RESOURCES,
  type EffectResource,
  type SandboxCounts,
  type SandboxRecord,
} from './types.js';

/** A vendor answer kept for replays: status, body, and the headers worth replaying. */
export interface StoredAnswer {
  status: number;
  body: unknown;
}

export type Admission =
  | { kind: 'new' }
  | { kind: 'replay'; answer: StoredAnswer; record: SandboxRecord }
  | { kind: 'key_reused' }
  | { kind: 'in_progress' };

interface KeyEntry {
  /** Canonical form of the first request sent with this key. */
  canon: string;
  /** Sandbox clock when the key was first seen (its window starts there). */
  firstAt: number;
  /** Set once the first request committed. */
  done?: { answer: StoredAnswer; record: SandboxRecord };
}

class ResourceState {
  readonly keys = new Map<string, KeyEntry>();
  readonly byId = new Map<string, SandboxRecord>();
  /** Records per Idempotency-Key the client sent (a vendor ignoring keys, or a replay past the window, pushes it above 1). */
  readonly perKey = new Map<string, number>();
  seq = 0;
}

export class Store {
  requests = 0;
  private offsetMs = 0;
  private readonly state: Record<EffectResource, ResourceState> = {
    tickets: new ResourceState(),
    emails: new ResourceState(),
    refunds: new ResourceState(),
  };
  readonly windows: Record<EffectResource, number> = { ...DEFAULT_KEY_WINDOW_MS };

  constructor(private readonly clock: () => number) {}

  /** The sandbox clock: the injected clock plus every advance. */
  now(): number {
    return this.clock() + this.offsetMs;
  }

  /** Moves the sandbox clock forward (a replay "after the window" without waiting a day). */
  advance(ms: number): void {
    this.offsetMs += ms;
  }

  /** Check-and-register in one synchronous step. A key older than its window is forgotten first. */
  admit(resource: EffectResource, key: string, canon: string): Admission {
    const s = this.state[resource];
    const now = this.now();
    let entry = s.keys.get(key);
    if (entry?.done && now - entry.firstAt >= this.windows[resource]) {
      s.keys.delete(key);
      entry = undefined;
    }
    if (entry === undefined) {
      s.keys.set(key, { canon, firstAt: now });
      return { kind: 'new' };
    }
    if (entry.canon !== canon) return { kind: 'key_reused' };
    if (entry.done === undefined) return { kind: 'in_progress' };
    return { kind: 'replay', ...entry.done };
  }

  /** Whether the service holds this key (in progress or done, inside its window). */
  knows(resource: EffectResource, key: string): boolean {
    const entry = this.state[resource].keys.get(key);
    return entry !== undefined && (entry.done === undefined || this.now() - entry.firstAt < this.windows[resource]);
  }

  /** The next sequence number of a resource (ids derive from it, so a reset sandbox repeats them). */
  nextSeq(resource: EffectResource): number {
    return (this.state[resource].seq += 1);
  }

  /**
   * Records a committed effect. `registered`: the key was admitted for this request (false in
   * ignore_keys mode, where the key's first record stays the one replayed).
   */
  commit(record: SandboxRecord, answer: StoredAnswer, registered: boolean): void {
    const s = this.state[record.kind];
    s.byId.set(record.id, record);
    const countKey = record.idempotencyKey ?? `(no key) ${record.id}`;
    s.perKey.set(countKey, (s.perKey.get(countKey) ?? 0) + 1);
    if (registered && record.idempotencyKey !== null) {
      const entry = s.keys.get(record.idempotencyKey);
      if (entry !== undefined) entry.done = { answer, record };
    }
  }

  /** Releases a key admitted for a request that then failed before committing (nothing is saved for it). */
  release(resource: EffectResource, key: string): void {
    const entry = this.state[resource].keys.get(key);
    if (entry !== undefined && entry.done === undefined) this.state[resource].keys.delete(key);
  }

  get(resource: EffectResource, id: string): SandboxRecord | undefined {
    return this.state[resource].byId.get(id);
  }

  /** Every record of a resource, oldest first. */
  all(resource: EffectResource): SandboxRecord[] {
    return [...this.state[resource].byId.values()];
  }

  /** A fresh snapshot; O(keys), meant for tests and chaos checks, not the hot path. */
  counts(): SandboxCounts {
    let duplicates = 0;
    const duplicateKeys: string[] = [];
    const byResource = {} as SandboxCounts['byResource'];
    for (const resource of EFFECT_RESOURCES) {
      const s = this.state[resource];
      for (const [key, n] of s.perKey) {
        if (n > 1) {
          duplicates += n - 1;
          duplicateKeys.push(key);
        }
      }
      // fromEntries defines own properties, so a key like "__proto__" stays data.
      byResource[resource] = { records: s.byId.size, byKey: Object.fromEntries(s.perKey) };
    }
    return { requests: this.requests, byResource, duplicates, duplicateKeys };
  }
}
