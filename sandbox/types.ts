/**
 * Shapes of the sandbox service: the records it commits, the faults it can be
 * told to inject, the counts it reports, and zod schemas for the admin bodies.
 */
import { z } from 'zod';

/** Resources whose POST is a business effect (counted, idempotent). */
export const EFFECT_RESOURCES = ['tickets', 'emails', 'refunds'] as const;
export type EffectResource = (typeof EFFECT_RESOURCES)[number];

/** Read-only endpoints; faults reach them only when a rule names them. */
export const READ_RESOURCES = ['kb', 'customers'] as const;
export type ReadResource = (typeof READ_RESOURCES)[number];

export const ID_PREFIX: Record<EffectResource, string> = {
  tickets: 'tkt',
  emails: 'em',
  refunds: 'rf',
};

export function isEffectResource(s: string): s is EffectResource {
  return (EFFECT_RESOURCES as readonly string[]).includes(s);
}

export interface SandboxRecord {
  id: string;
  resource: EffectResource;
  status: 'committed';
  idempotency_key: string;
  request_id: string | null;
  /** ISO 8601 */
  created_at: string;
  body: Record<string, unknown>;
}

/** Answer of the reconciliation API (GET /v1/:resource?idempotency_key=|request_id=). */
export type LookupResult =
  /** `records`: how many business effects carry this key (more than 1 = a duplicate reached the service). */
  | { status: 'committed'; record: SandboxRecord; records?: number }
  | { status: 'processing' }
  /** No record and nothing in flight: the service proves there is no effect and no running request. */
  | { status: 'absent'; stopped: true };

export const FAULT_KINDS = [
  'rate_limit',
  'unavailable',
  'refuse_before_commit',
  'lost_response_after_commit',
  'error_after_commit',
  'slow_commit',
  'malformed_response',
  'ignore_keys',
  'no_lookup',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export const faultRuleSchema = z
  .object({
    kind: z.enum(FAULT_KINDS),
    /** A resource name; unset = all effect resources (tickets, emails, refunds). */
    resource: z.string().min(1).optional(),
    /** Chance the rule fires on a request it matches, drawn from the seeded PRNG. Default 1. */
    probability: z.number().min(0).max(1).optional(),
    /** Fire at most this many times, then the rule is spent. Unset = unlimited. */
    count: z.number().int().min(0).optional(),
    /** slow_commit delay. Default 1000. */
    ms: z.number().int().min(0).optional(),
    /** Retry-After seconds for rate_limit (default 0) and unavailable (header only if set). */
    retryAfterS: z.number().min(0).optional(),
  })
  .strict();
export type FaultRule = z.infer<typeof faultRuleSchema>;

/** Body of POST /_sandbox/faults and POST /_sandbox/faults/add. */
export const faultsBodySchema = z.object({ rules: z.array(faultRuleSchema) }).strict();
export type FaultsBody = z.infer<typeof faultsBodySchema>;

export interface ResourceCounts {
  /** Committed records of this resource. */
  records: number;
  /** Committed records per Idempotency-Key the client sent. */
  byKey: Record<string, number>;
}

export interface SandboxCounts {
  /** HTTP requests to /v1/* (faulted ones included; admin and healthz excluded). */
  requests: number;
  byResource: Record<EffectResource, ResourceCounts>;
  /** Sum over (resource, key) of max(0, records - 1). */
  duplicates: number;
  /** Keys with more than one record, one entry per (resource, key). */
  duplicateKeys: string[];
}

export const sandboxCountsSchema: z.ZodType<SandboxCounts> = z.object({
  requests: z.number(),
  byResource: z.object({
    tickets: z.object({ records: z.number(), byKey: z.record(z.string(), z.number()) }),
    emails: z.object({ records: z.number(), byKey: z.record(z.string(), z.number()) }),
    refunds: z.object({ records: z.number(), byKey: z.record(z.string(), z.number()) }),
  }),
  duplicates: z.number(),
  duplicateKeys: z.array(z.string()),
});
