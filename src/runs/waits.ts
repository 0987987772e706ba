/**
 * A run parked on a wait (status `sleeping`, `waiting_event` or `waiting_child`): what it waits for, recorded on
 * the run hash (`wait`, JSON) by the commit that parks it and removed by the script that wakes it. The run's
 * current job is the wake job, a delayed step job due at `at` (for a child, the parent's deadline; the child's end
 * promotes it); the sweep re-creates it if it is missing, and promotes it when the child ended and the job did not.
 */
import { z } from 'zod';

export const WAIT_STATUSES = ['sleeping', 'waiting_event', 'waiting_child'] as const;
export type WaitStatus = (typeof WAIT_STATUSES)[number];

/** One child a parent waits on: the child's run and the agent-tool call that started it. */
const waitedChildSchema = z
  .object({
    runId: z.string().regex(/^r_[0-9a-f]{24}$/),
    /** The call whose result the child's outcome becomes. */
    callId: z.string(),
    tool: z.string(),
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
