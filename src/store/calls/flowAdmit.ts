/** Typed call of src/store/lua/flowAdmit-8.lua: waiting runs admitted in weighted round-robin. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';
import { FLOW_STRIDE_SCALE } from '../../core/flowWeight.js';

export interface AdmitArgs {
  now: number;
  max: number;
  /** The admitting connection (src/store/owners.ts): its admissions are pending until their jobs are released. */
  owner: string;
  defaultWeight: number;
  /** 0 = none */
  tenantLimit: number;
  agentLimit: number;
  fleetLimit: number;
  /** Configured weights and limits (`w:<tenant>`, `t:<tenant>`, `a:<agent>`); run-time settings win over them. */
  configured: Record<string, number>;
  /**
   * A run the caller has just created: when another process admitted it before it existed (its admission pending, its
   * job not found then), it is returned first, without held and weight, for the caller to release its job.
   */
  created?: string;
}

export interface Admitted {
  runId: string;
  shard: number;
  tenant: string;
  /** The tenant's runs at work once this one is admitted, and its weight (its step jobs' share); absent when unknown. */
  held?: number;
  weight?: number;
  /** The job to release: a woken run's wake job; absent for a new run (its step 1 job). */
  jobId?: string;
}

export async function flowAdmit(redis: RedisClient, k: FlowKeys, a: AdmitArgs): Promise<Admitted[]> {
  const res = await script(redis, 'flowAdmit')(
    k.waiting,
    k.held,
    k.pending,
    k.counts,
    k.turns,
    k.passes,
    k.settings,
    k.admitted,
    a.now,
    a.max,
    a.owner,
    k.linePrefix,
    a.defaultWeight,
    a.tenantLimit,
    a.agentLimit,
    a.fleetLimit,
    JSON.stringify(a.configured),
    FLOW_STRIDE_SCALE,
    a.created ?? '',
  );
  const flat = Array.isArray(res) ? res.map(String) : [];
  const out: Admitted[] = [];
  for (let i = 0; i + 5 < flat.length; i += 6)
    out.push({
      runId: flat[i]!,
      shard: Number(flat[i + 1]),
      tenant: flat[i + 2]!,
      ...(flat[i + 3] ? { held: Number(flat[i + 3]), weight: Number(flat[i + 4]) } : {}),
      ...(flat[i + 5] ? { jobId: flat[i + 5] } : {}),
    });
  return out;
}
