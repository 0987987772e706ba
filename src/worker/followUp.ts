/**
 * The previous conversation of a follow-up run (a run created with `previousRunId`, see
 * createRun-14.lua): what the agent's followUp(previous, input) makes of the subject's run
 * before this one, sent to the model before this run's first message.
 *
 * Read once, when the follow-up's first model call is prepared, and only once the previous run
 * has left `queued` and `running` (it ended, or a person holds it), and so has any older run of the
 * subject behind a previous run that stopped while it waited: until then the follow-up
 * waits (its step job is delayed, see StepProcessor). The text is stored in the run's hash
 * (`followUpContext`, HSETNX: the first writer wins), so every later step, every redelivery and
 * every worker sends the same text even if the previous run moves on. If the process dies between
 * reading the previous run and the HSETNX, the next delivery reads it again: nothing was sent yet.
 * A previous run whose keys have expired gives an empty text (the run goes on unlinked in effect).
 */
import type { Agent, PreviousRun } from '../core/agent.js';
import type { DecisionEntry, JournalEntry } from '../core/journal.js';
import type { RunSpec } from '../runs/spec.js';
import type { RunStore } from '../runs/store.js';
import { countTokens } from '../core/tokens.js';
import type { RunStatus } from '../core/status.js';
import { readRun, type RunField } from '../store/runRecord.js';

/** The run hash field holding a follow-up's frozen previous conversation. */
export const FOLLOW_UP_FIELD = 'followUpContext' satisfies RunField;

/**
 * The prompt tokens a follow-up's previous conversation adds to every estimate of its run (the text and its separator).
 */
export function followUpTokens(text: string | null | undefined): number {
  return text ? countTokens(text) + 1 : 0;
}

/** Statuses in which the previous run is still at work: a follow-up waits for it. */
const ACTIVE = new Set(['queued', 'running']);

export type FollowUpContext = { text: string } | { waitingFor: string };

export class FollowUps {
  private readonly texts = new WeakMap<RunSpec, string>();

  constructor(private readonly store: RunStore) {}

  /** The text already known for this run (after context() answered it), or '' for a run that is no follow-up. */
  known(spec: RunSpec): string {
    return this.texts.get(spec) ?? '';
  }

  /** The follow-up's previous conversation, or the previous run's status while it is still at work. */
  async context(agent: Agent, spec: RunSpec): Promise<FollowUpContext> {
    const previousRunId = spec.previousRunId;
    if (previousRunId === undefined) return { text: '' };
    const hit = this.texts.get(spec);
    if (hit !== undefined) return { text: hit };
    const { redis, keys } = this.store;
    const runKey = keys.run(spec.runId).run;
    let text = (await readRun(redis, keys, spec.runId, [FOLLOW_UP_FIELD]))?.followUpContext ?? null;
    if (text === null) {
      const previous = await readRun(redis, keys, previousRunId, [FOLLOW_UP_FIELD]);
      const status = previous?.status ?? null;
      const earlier = previous?.followUpContext ?? null;
      if (status !== null && ACTIVE.has(status)) return { waitingFor: status };
      const older = await this.olderAtWork(previousRunId, earlier);
      if (older) return { waitingFor: older };
      const fresh =
        status === null ? '' : agent.followUp(await this.previous(previousRunId, status, earlier), spec.input);
      await redis.hsetnx(runKey, FOLLOW_UP_FIELD, fresh);
      text = (await readRun(redis, keys, spec.runId, [FOLLOW_UP_FIELD]))?.followUpContext ?? fresh;
    }
    this.texts.set(spec, text);
    return { text };
  }

  /**
   * The status of an older run of the subject still at work, behind a previous run that never got past its own
   * wait (it stopped while waiting: no followUpContext). Such a run is not superseded by the previous one in fact:
   * without this walk the follow-up would start next to it. The walk stops at the first run that got past its wait
   * (it proved every run before it was no longer at work, and none of those may come back: includes/subject.lua)
   * or that is no follow-up; usually at once (one read).
   */
  private async olderAtWork(previousRunId: string, previousText: string | null): Promise<string | undefined> {
    const { redis, keys } = this.store;
    let text = previousText;
    let runId = previousRunId;
    while (text === null) {
      const older = (await readRun(redis, keys, runId, ['previousRunId']))?.previousRunId;
      if (!older) return undefined;
      const run = await readRun(redis, keys, older, [FOLLOW_UP_FIELD]);
      if (!run) return undefined;
      if (ACTIVE.has(run.status)) return run.status;
      [runId, text] = [older, run.followUpContext ?? null];
    }
    return undefined;
  }

  private async previous(runId: string, status: RunStatus, earlier: string | null): Promise<PreviousRun> {
    const [spec, journal] = await Promise.all([this.store.readSpec(runId), this.store.transcript(runId)]);
    const conversation = journal.filter((e): e is Exclude<JournalEntry, { kind: 'operator' }> => e.kind !== 'operator');
    const final = conversation
      .filter((e): e is DecisionEntry => e.kind === 'decision' && e.final !== undefined)
      .at(-1)?.final;
    return { runId, status, input: spec?.input, final, journal: conversation, ...(earlier ? { earlier } : {}) };
  }
}
