/**
 * Shapes of the sandbox service: the records it commits, the faults it can be
 * told to inject, the counts it reports, and zod schemas for the admin bodies.
 * The three effect resources are the vendors' own: Zendesk tickets, Resend
 * emails, Stripe refunds (sandbox/vendors/*).
 */
import { z } from 'zod';

/** Resources whose POST is a business effect (counted, idempotent). */
export const EFFECT_RESOURCES = ['tickets', 'emails', 'refunds'] as const;
export type EffectResource = (typeof EFFECT_RESOURCES)[number];

/** Read-only endpoints; faults reach them only when a rule names them. */
export const READ_RESOURCES = ['kb', 'customers'] as const;
export type ReadResource = (typeof READ_RESOURCES)[number];

/**
 * How long each vendor keeps an Idempotency-Key (their documented windows): a
 * request with a known key inside it is replayed; after it, the key is
 * forgotten and the same request is processed again (a second effect).
 */
export const DEFAULT_KEY_WINDOW_MS: Record<EffectResource, number> = {
  tickets: 2 * 3600_000, // Zendesk: 2 hours
  emails: 24 * 3600_000, // Resend: 24 hours
  refunds: 24 * 3600_000, // Stripe: at least 24 hours
};

export function isEffectResource(s: string): s is EffectResource {
  return (EFFECT_RESOURCES as readonly string[]).includes(s);
}

/** One committed business effect, in the vendor's own resource shape (`resource`). */
export interface SandboxRecord {
  /** The vendor's id: Zendesk's integer (as a string), Resend's UUID, Stripe's `re_...`. */
  id: string;
  kind: EffectResource;
  /** The Idempotency-Key it was created with, or null when none was sent. */
  idempotencyKey: string | null;
  /** Sandbox clock (ms) at commit. */
  createdAtMs: number;
  /** The vendor's resource object as the API returns it. */
  resource: Record<string, unknown>;
  /** Zendesk only: the ticket's comments, the first one its description. */
  comments?: Record<string, unknown>[];
}

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
  'list_lag',
  'conflict_in_progress',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * What each kind does (a rule names a resource: tickets, emails, refunds, kb, customers; unset = the three effects):
 *  - rate_limit: 429 in the vendor's shape with Retry-After, nothing processed (Stripe's, Resend's, Zendesk's limit);
 *  - unavailable: 503, nothing processed; refuse_before_commit: the socket is dropped before anything is processed;
 *  - lost_response_after_commit: the effect is committed, then the socket is dropped (Resend sent the email, the answer is lost);
 *  - error_after_commit: committed, then 500 (Zendesk created the ticket but answered 500);
 *  - malformed_response: committed, then half a JSON body; slow_commit: the commit waits `ms` (a same-key request meanwhile gets the vendor's 409);
 *  - ignore_keys: a known key is processed again (a vendor that does not honour keys: a second effect, counted);
 *  - no_lookup: the service cannot answer for an earlier request: the lists by external_id / payment answer 500, and a
 *    request with a key it already holds answers 500 without processing;
 *  - list_lag: Zendesk's list by external_id does not show yet a ticket that exists (empty list);
 *  - conflict_in_progress: a keyed create answers the vendor's 409 "same key still in progress", nothing processed.
 */
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
