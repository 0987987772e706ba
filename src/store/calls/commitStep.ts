/**
 * Typed call of src/store/lua/commitStep-23.lua: the fenced commit of one step
 * (journal entries, budget, cursor and status, the next step's job, and the
 * completion of this job), one atomic change. The Lua's argument positions
 * (BullMQ's keys interleaved, the journal entries between fixed ARGV) are
 * written here and nowhere else.
 * Decision record 0001: docs/decisions/0001-the-commit-includes-the-next-job-and-completes-thi.md.
 */
import type { RedisClient } from '../connect.js';
import { commitBullKeys, type CapturedAdd, type CapturedJobAdd } from '../bullmqInternals.js';
import { expectReply } from '../codes.js';
import { callScript, type ScriptArg } from '../luaScripts.js';
import type { RunStatus } from '../../core/status.js';

export interface CommitStepKeys {
  run: string;
  budget: string;
  journal: string;
  events: string;
  jobLock: string;
  actions: string;
  /** The action a park into waiting_approval asks approval for; the run hash for any other commit (untouched). */
  approvalAction: string;
  /** The shard's approvals zset. */
  approvals: string;
}

export interface CommitStepArgs {
  token: string;
  step: number;
  status: RunStatus;
  reason: string;
  stepsDelta: number;
  tokensDelta: number;
  /** µ$ the step's model attempts cost (failed ones included), charged with the tokens. */
  costDelta: number;
  /** UTF-8 bytes the transcript grows by; undefined when the run's byte count is unknown (not kept for it). */
  contextBytesDelta: number | undefined;
  now: number;
  eventsMaxLen: number;
  /** Move the cursor on (false: the run parks mid-step). */
  advance: boolean;
  retentionMs: number;
  /** The step_committed event (JSON). */
  committedEvent: string;
  /** The entries carry the step's decision (it must not be journalled yet). */
  carriesDecision: boolean;
  jobId: string;
  nextJobId: string;
  /**
   * sha1 of the step's decision entry when it was journalled before the commit (not carried by it): the server must
   * hold it as the step's decision (decisionDigest). Undefined when the commit follows no journalled decision.
   */
  decision?: string | undefined;
  /** Journal entries as stored (JSON or compressed: packEntry), appended in order. */
  entries: readonly (string | Buffer)[];
  /** BullMQ's completion of this job (captureMoveToCompleted). */
  finish: CapturedAdd;
  /**
   * BullMQ's add of the next step's job (captureAddJob: standard, or prioritized under flow control): its keys are
   * always passed, its job added only when `addNext`.
   */
  next: CapturedJobAdd;
  addNext: boolean;
  /** This delivery's step_started event (JSON), '' when journalDecision already emitted it. */
  startedEvent: string;
  /** The decision event (JSON), '' unless carriesDecision. */
  decisionEvent: string;
  /** The action a park into waiting_approval asks approval for ('' for none), and that approval's expiry. */
  approvalFor: string;
  approvalExpiresAt: number;
  /** A park on a wait: its record (JSON), '' for none. */
  wait: string;
}

export interface CommitStepReply {
  journalLength: number;
  /**
   * moveToFinished's reply: 0, the worker's next job, or BullMQ's negative code (the commit stands; the worker
   * completes the job itself).
   */
  finished: unknown;
  /** The status committed: the one asked, or what a recorded cancel or an expired approval made of it. */
  committed: string;
}

const NO_JOB_ARGV: readonly string[] = ['', '', ''];

/**
 * Throws the FenceError of a refusal: lock lost, stale step, run missing / not running, decision already journalled.
 */
export async function commitStep(redis: RedisClient, k: CommitStepKeys, a: CommitStepArgs): Promise<CommitStepReply> {
  // One array, by concat (sized once; a call with five spreads grew its arguments step by step), in the Lua's order.
  const args = ([k.run, k.budget, k.journal, k.events, k.jobLock, k.actions] as ScriptArg[]).concat(
    commitBullKeys(a.next, a.finish),
    [
      k.approvalAction,
      k.approvals,
      a.token,
      a.step,
      a.status,
      a.reason,
      a.stepsDelta,
      a.tokensDelta,
      a.contextBytesDelta ?? '',
      a.now,
      a.eventsMaxLen,
      a.advance ? 1 : 0,
      a.retentionMs,
      a.committedEvent,
      a.carriesDecision ? 1 : 0,
      a.jobId,
      a.nextJobId,
      a.entries.length,
    ],
    a.finish.argv,
    // addStandardJob's three argv: blanks when no job is added.
    a.addNext ? a.next.argv : NO_JOB_ARGV,
    [
      a.startedEvent,
      a.decisionEvent,
      a.approvalFor,
      a.approvalExpiresAt,
      a.wait,
      a.decision ?? '',
      a.next.prioritized ? 'p' : '',
      a.costDelta,
    ],
    // The journal entries, the one variable-length run, last.
    a.entries,
  );
  const res = await callScript(redis, 'commitStep', args);
  const [journalLength, finished, committed] = expectReply(res, { step: a.step }) as [number, unknown, string];
  return { journalLength: Number(journalLength), finished, committed };
}
