/**
 * In-memory records and idempotency state of the sandbox, per effect resource.
 *
 * `admit` is the atomic step: it checks the key and, for a new key, registers
 * it as processing in the same synchronous call, so two concurrent POSTs with
 * one key can never both commit (the second sees in_progress or a replay).
 * A reset replaces the whole Store; a request still holding the old one
 * commits into it and the effect is invisible afterwards, as intended.
 */
import {
  EFFECT_RESOURCES,
  ID_PREFIX,
  type EffectResource,
  type LookupResult,
  type SandboxCounts,
  type SandboxRecord,
} from './types.js';

export type Admission =
  | { kind: 'new' }
  | { kind: 'replay'; record: SandboxRecord }
  | { kind: 'key_reused' }
  | { kind: 'in_progress' };

export interface CommitInput {
  key: string;
  canon: string;
  requestId: string | null;
  body: Record<string, unknown>;
  /** true when `admit` registered the key for this request (false in ignore_keys mode). */
  registered: boolean;
}

interface KeyEntry {
  /** Canonical JSON of the first body sent with this key. */
  canon: string;
  /** undefined while the first request is processing. */
  record?: SandboxRecord;
}

class ResourceState {
  readonly keys = new Map<string, KeyEntry>();
  readonly byId = new Map<string, SandboxRecord>();
  /** First record committed with each X-Request-Id. */
  readonly byRequestId = new Map<string, SandboxRecord>();
  /** Records per Idempotency-Key the client sent (ignore_keys mode can push it above 1). */
  readonly perKey = new Map<string, number>();
  /** POSTs currently in flight, from headers to the end of their work, by key and by request id. */
  readonly inflightKeys = new Map<string, number>();
  readonly inflightRequestIds = new Map<string, number>();
  seq = 0;
}

export class Store {
  requests = 0;
  private readonly state: Record<EffectResource, ResourceState> = {
    tickets: new ResourceState(),
    emails: new ResourceState(),
    refunds: new ResourceState(),
  };

  constructor(private readonly now: () => number) {}

  /** Check-and-register in one synchronous step. */
  admit(resource: EffectResource, key: string, canon: string): Admission {
    const s = this.state[resource];
    const entry = s.keys.get(key);
    if (entry === undefined) {
      s.keys.set(key, { canon });
      return { kind: 'new' };
    }
    if (entry.canon !== canon) return { kind: 'key_reused' };
    if (entry.record === undefined) return { kind: 'in_progress' };
    return { kind: 'replay', record: entry.record };
  }

  commit(resource: EffectResource, input: CommitInput): SandboxRecord {
    const s = this.state[resource];
    s.seq += 1;
    const record: SandboxRecord = {
      id: `${ID_PREFIX[resource]}_${String(s.seq).padStart(6, '0')}`,
      resource,
      status: 'committed',
      idempotency_key: input.key,
      request_id: input.requestId,
      created_at: new Date(this.now()).toISOString(),
      body: input.body,
    };
    s.byId.set(record.id, record);
    if (input.requestId !== null && !s.byRequestId.has(input.requestId)) s.byRequestId.set(input.requestId, record);
    s.perKey.set(input.key, (s.perKey.get(input.key) ?? 0) + 1);
    if (input.registered) {
      const entry = s.keys.get(input.key);
      if (entry !== undefined) entry.record = record;
    }
    return record;
  }

  /** Mark a POST as in flight for lookups; call the returned function exactly once when its work ends. */
  track(resource: EffectResource, key: string, requestId: string | null): () => void {
    const s = this.state[resource];
    bump(s.inflightKeys, key, 1);
    if (requestId !== null) bump(s.inflightRequestIds, requestId, 1);
    return () => {
      bump(s.inflightKeys, key, -1);
      if (requestId !== null) bump(s.inflightRequestIds, requestId, -1);
    };
  }

  lookupByKey(resource: EffectResource, key: string): LookupResult {
    const s = this.state[resource];
    const entry = s.keys.get(key);
    if (entry?.record !== undefined) return { status: 'committed', record: entry.record, records: s.perKey.get(key) ?? 1 };
    if (entry !== undefined || s.inflightKeys.has(key)) return { status: 'processing' };
    return { status: 'absent', stopped: true };
  }

  lookupByRequestId(resource: EffectResource, requestId: string): LookupResult {
    const s = this.state[resource];
    const record = s.byRequestId.get(requestId);
    if (record !== undefined) return { status: 'committed', record };
    if (s.inflightRequestIds.has(requestId)) return { status: 'processing' };
    return { status: 'absent', stopped: true };
  }

  get(resource: EffectResource, id: string): SandboxRecord | undefined {
    return this.state[resource].byId.get(id);
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

function bump(map: Map<string, number>, key: string, by: number): void {
  const n = (map.get(key) ?? 0) + by;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}
