/**
 * Whose authority a schedule fires on. A schedule made (or resumed) with a tenant token records a fingerprint of
 * that token, never the token; each tick fires only while the tenant's TENANT_TOKENS entry still has that
 * fingerprint. Removing or rotating the token (how a tenant's access is revoked, docs/security.md) therefore stops
 * its schedules as it stops its API calls: a tick finds the credential gone and pauses the schedule
 * `credential_revoked`. A schedule made with the producer token fires on the deployment's own authority, and one
 * stored before owners were recorded counts as the producer's.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { ownValue } from '../core/ownValue.js';

/** Who makes or resumes a schedule, as the route authenticated it. */
export type ScheduleActor = { kind: 'producer' } | { kind: 'tenant'; token: string };

/** What a definition keeps of its owner (the fingerprint never leaves Redis: see scheduleView). */
export const scheduleOwnerSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('producer') }).strict(),
  z.object({ kind: z.literal('tenant'), credential: z.string().regex(/^[0-9a-f]{64}$/) }).strict(),
]);
export type ScheduleOwner = z.infer<typeof scheduleOwnerSchema>;

/** A digest of the token's sha256, under a label of its own: equal for the same token, useless as the token. */
function credentialOf(token: string): string {
  const digest = createHash('sha256').update(token).digest();
  return createHash('sha256').update('schedule-credential\0').update(digest).digest('hex');
}

export function ownerOf(actor: ScheduleActor): ScheduleOwner {
  return actor.kind === 'producer' ? { kind: 'producer' } : { kind: 'tenant', credential: credentialOf(actor.token) };
}

/**
 * Whether the schedule of `tenant` may fire now: a tenant-owned one only while that tenant's configured token is the
 * one it was made with. Read from this process's configuration, so every process that ticks schedules (the
 * workers) must be given the same TENANT_TOKENS as the API.
 */
export function ownerStillValid(
  cfg: Pick<Config, 'TENANT_TOKENS'>,
  tenant: string,
  owner: ScheduleOwner | undefined,
): boolean {
  if (owner === undefined || owner.kind === 'producer') return true;
  const token = ownValue(cfg.TENANT_TOKENS, tenant);
  return token !== undefined && credentialOf(token) === owner.credential;
}
