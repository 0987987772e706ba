/**
 * A run parked on a wait (status `sleeping`, `waiting_event` or `waiting_child`): what it waits for, recorded on
 * the run hash (`wait`, JSON) by the commit that parks it and removed by the script that wakes it. The run's
 * current job is the wake job, a delayed step job due at `at` (for a child, the parent's deadline; the child's end
 * promotes it); the sweep re-creates it if it is missing, and promotes it when the child ended and the job did not.
 */
import { z } from 'zod';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { releaseEventWait } from '../store/calls/releaseEventWait.js';
import { isTerminal } from '../core/status.js';
import { readRun, readStatus } from '../store/runRecord.js';
import type { Agent } from '../core/agent.js';
import type { JournalEntry } from '../core/journal.js';
import { agentSafeParse } from '../core/agentCode.js';

export const WAIT_STATUSES = ['sleeping', 'waiting_event', 'waiting_child'] as const;
export type WaitStatus = (typeof WAIT_STATUSES)[number];

/** One child a parent waits on: the child's run and the agent-tool call that started it. */
const waitedChildSchema = z
  .object({
    runId: z.string().regex(/^r_[0-9a-f]{24}$/),
    /** The call whose result the child's outcome becomes. */
    callId: z.string(),
    tool: z.string(),
    /**
     * The call asked again for a hand-off an earlier call of the run started (src/runs/children.ts): its result is
     * the child's outcome marked `deduplicated`, and the child's spend is charged with the earlier call's only.
     */
    repeat: z.literal(true).optional(),
  })
  .strict();

const waitSchemas = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('sleep'), at: z.number().int().nonnegative() }).strict(),
  z
    .object({
      kind: z.literal('event'),
      /** Due time: the wait times out then (capped at the run's deadline). */
      at: z.number().int().nonnegative(),
      /** The event key, as the tool asked it (tenant-scoped by the run's tenant). */
      key: z.string().min(1).max(200),
      /** The step and call that asked: the wait's identity and where its result is journalled. */
      step: z.number().int().positive(),
      callId: z.string(),
      tool: z.string(),
    })
    .strict(),
  z
    .object({
      kind: z.literal('child'),
      /** Due time: the parent's deadline (the children's are no later). */
      at: z.number().int().nonnegative(),
      step: z.number().int().positive(),
      /** Every child the step started, in the order the model asked: the run waits until all of them ended. */
      children: z.array(waitedChildSchema).min(1),
    })
    .strict(),
]);

/**
 * A child wait recorded before a step could start several children named its one child at the top
 * (`childRunId`, `callId`, `tool`): read as a list of one, so a run parked by an earlier version wakes as before.
 */
function upgraded(raw: unknown): unknown {
  const r = raw as Record<string, unknown> | null;
  if (r?.kind !== 'child' || typeof r.childRunId !== 'string' || 'children' in r) return raw;
  const { childRunId, callId, tool, ...rest } = r;
  return { ...rest, children: [{ runId: childRunId, callId, tool }] };
}

export const waitRecordSchema = z.preprocess(upgraded, waitSchemas);
export type WaitRecord = z.output<typeof waitSchemas>;

export function statusOfWait(wait: WaitRecord): WaitStatus {
  return wait.kind === 'sleep' ? 'sleeping' : wait.kind === 'event' ? 'waiting_event' : 'waiting_child';
}

export function isWaitStatus(status: string): status is WaitStatus {
  return (WAIT_STATUSES as readonly string[]).includes(status);
}

/** A wait's identity: one run, step and call (a delivery names the wait it resumed). */
export function waitIdOf(runId: string, wait: { step: number; callId: string }): string {
  return `${runId}:${wait.step}:${wait.callId}`;
}

/** The wait recorded on a run hash, or undefined when there is none or it does not parse. */
export function parseWait(raw: string | null | undefined): WaitRecord | undefined {
  if (!raw) return undefined;
  try {
    const r = waitRecordSchema.safeParse(JSON.parse(raw));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The event keys (as the tools named them, before KeySpace.eventKey scopes them) that a run's calls of its agent's
 * event-wait tools asked for, asked of the tools again from the journalled decisions: nothing else keeps them once
 * the run woke (its `wait` record goes at the wake), and a wait that a kept delivery answered at once never parked.
 * A call whose tool is gone, whose arguments no longer parse (erased already) or whose tool throws names none; so does
 * an agent tool's call (a child, not a key).
 */
export function eventKeysAsked(
  agent: Agent,
  run: { runId: string; input: unknown },
  transcript: readonly JournalEntry[],
): string[] {
  const keys = new Set<string>();
  const signal = new AbortController().signal;
  for (const entry of transcript) {
    if (entry.kind !== 'decision') continue;
    for (const call of entry.toolCalls) {
      const tool = agent.tools.get(call.name);
      if (tool?.effect !== 'wait' || tool.startsChild === true) continue;
      const args = agentSafeParse(tool.args, call.args ?? {});
      if (!args.success) continue;
      try {
        const asked = tool.wait(args.data, { runId: run.runId, step: entry.step, signal, input: run.input });
        if (asked.kind === 'event' && typeof asked.key === 'string') keys.add(asked.key);
      } catch {
        // A tool that cannot say its key again names none.
      }
    }
  }
  return [...keys];
}

/** What the key releases below read and write: the store, and the waits counter. */
export interface WaitKeyStore {
  redis: RedisClient;
  keys: KeySpace;
  metrics: { waits: { inc(labels: { kind: string; outcome: string }): void } };
}

/**
 * Frees an event key whose wait belongs to a run that has ended (or whose keys expired) without taking it: every way
 * a run ends (a cancel recorded at a commit, a budget stop, a step that failed for good, a settled dead job) leaves
 * the key as its wait registered it, and the run's own slot cannot change a key on another slot in the same script.
 * So a delivery that finds a wait on the key, and a new wait that finds the key busy, ask the holder's run first:
 * ended, the key is released (a compare-and-set on the wait id: a new wait is never touched) and the caller goes on
 * as if no wait held it. A run that is parked with a person (needs_human) keeps its key: it may resume.
 * Returns whether the key was released.
 */
export async function releaseIfHolderEnded(s: WaitKeyStore, eventKey: string): Promise<boolean> {
  const [state, runId, waitId] = await s.redis.hmget(eventKey, 'state', 'runId', 'waitId');
  if ((state !== 'waiting' && state !== 'delivered') || !runId || !waitId) return false;
  const status = await readStatus(s.redis, s.keys, runId);
  if (status !== undefined && !isTerminal(status)) return false;
  return released(s, eventKey, waitId);
}

/**
 * A cancel releases the key its run waits on before it ends the run (src/store/lua/stopRun-5.lua): a delivery after
 * the release finds no wait and is kept, or starts a follow-up run, as after a timeout; one before it was the run's,
 * as any input a cancelled run got before its cancel. The release cannot be in the cancel's own script (the key has
 * its own hash tag, the run another), and it comes first so that no delivery is answered `resumed` for a run
 * already cancelled. If the process dies in between, the run stays parked until its timeout, its key free, and the
 * cancel is asked again.
 */
export async function releaseWaitForCancel(s: WaitKeyStore, runId: string): Promise<void> {
  const run = await readRun(s.redis, s.keys, runId, ['wait', 'tenant', 'agent']);
  const wait = parseWait(run?.wait ?? null);
  if (!run || wait?.kind !== 'event' || !run.tenant || !run.agent) return;
  if (run.status === 'running' || run.status === 'queued') return;
  await released(s, s.keys.eventKey(run.tenant, run.agent, wait.key), waitIdOf(runId, wait));
}

async function released(s: WaitKeyStore, eventKey: string, waitId: string): Promise<boolean> {
  const freed = await releaseEventWait(s.redis, eventKey, waitId);
  if (freed) s.metrics.waits.inc({ kind: 'event', outcome: 'key_released' });
  return freed;
}
