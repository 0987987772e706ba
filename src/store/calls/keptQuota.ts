/** Typed calls of src/store/lua/keptQuota-2.lua: a tenant's room for kept deliveries, reserved and given back. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export type KeptReservation = { id: string; bytes: number };
export type ReserveReply = { kind: 'ok' } | { kind: 'count' | 'bytes'; oldestEndsAt: number };

export async function reserveKept(
  redis: RedisClient,
  keys: { set: string; bytes: string },
  r: KeptReservation,
  a: { endsAt: number; maxCount: number; maxBytes: number; now: number },
): Promise<ReserveReply> {
  const res = await script(redis, 'keptQuota')(
    keys.set,
    keys.bytes,
    'reserve',
    `${r.id}:${r.bytes}`,
    r.bytes,
    a.endsAt,
    a.maxCount,
    a.maxBytes,
    a.now,
  );
  const [kind, oldest] = expectReply(res) as [string, string | undefined];
  if (kind === 'count' || kind === 'bytes') return { kind, oldestEndsAt: Number(oldest) };
  return { kind: 'ok' };
}

export async function releaseKept(
  redis: RedisClient,
  keys: { set: string; bytes: string },
  r: KeptReservation,
): Promise<void> {
  expectReply(
    await script(redis, 'keptQuota')(keys.set, keys.bytes, 'release', `${r.id}:${r.bytes}`, r.bytes, 0, 0, 0, 0),
  );
}
