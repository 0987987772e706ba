/**
 * Deterministic provider: plays the request's script (the run's own, else its
 * agent's demoScript), turn i at step i. Past the end of the script it answers
 * a final message. Transient failures and missing usage are scripted, for tests.
 * A branching turn picks its branch by the run's last tool results (it reads the
 * transcript for that step only).
 */
import type { JournalEntry } from '../core/journal.js';
import { RetryableError, TerminalError } from '../core/errors.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../core/model.js';
import {
  isBranchingTurn,
  SCRIPT_MAX_TURNS,
  scriptBranchingTurnSchema,
  scriptTurnSchema,
  type ScriptBranchingTurn,
  type ScriptEntry,
  type ScriptTurn,
} from './scriptedTurns.js';

const INVALID = 'the script is not a valid script';

/** The script's error (`invalid_input`): nothing was asked of any model, so the attempt is charged nothing (`reach`). */
function invalidScript(message: string, issues?: string[]): TerminalError {
  return new TerminalError('invalid_input', message, { ...(issues ? { issues } : {}), reach: 'none' });
}

/**
 * The turn of step `step` (undefined past the script's end), validated when it is played: one turn a step. Validating
 * the whole script kept a parsed copy of every turn per run and per worker process, and a run's steps land on every
 * worker of the fleet. No script, or an invalid one, is a TerminalError (`invalid_input`): no retry makes one. The
 * intake validated the whole script already (src/producer/schemas.ts); this guards what Redis hands back.
 */
function entryOf(raw: unknown, step: number): ScriptEntry | undefined {
  if (raw === undefined) throw invalidScript('no script: the run brought none and its agent has no demoScript');
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > SCRIPT_MAX_TURNS)
    throw invalidScript(INVALID, [`a list of 1 to ${SCRIPT_MAX_TURNS} turns`]);
  if (step > raw.length) return undefined;
  const entry: unknown = raw[step - 1];
  const r = isBranchingTurn(entry) ? scriptBranchingTurnSchema.safeParse(entry) : scriptTurnSchema.safeParse(entry);
  if (!r.success)
    throw invalidScript(
      INVALID,
      r.error.issues.map((i) => [step - 1, ...i.path].join('.')),
    );
  return r.data;
}

/**
 * The JSON of each tool result (`status` and `output`) of the last step that has any: what a branch's
 * `whenLastToolResult.contains` looks in. A child run's answer or stop, journalled when its parent woke, is the
 * result of the step that started it.
 */
function lastToolResults(transcript: readonly JournalEntry[]): string[] {
  const observations = transcript.filter((e) => e.kind === 'observation');
  const last = observations.at(-1)?.step;
  return observations.filter((e) => e.step === last).map((e) => JSON.stringify({ status: e.status, output: e.output }));
}

/** The branch a branching turn plays: the first whose condition holds; none holding is the script's error. */
function branchOf(
  entry: ScriptBranchingTurn,
  transcript: readonly JournalEntry[] | undefined,
  step: number,
): ScriptTurn {
  if (!transcript) throw invalidScript('a branching turn was asked without the transcript');
  const results = lastToolResults(transcript);
  const branch = entry.branches.find(
    (b) => !b.whenLastToolResult || results.some((r) => r.includes(b.whenLastToolResult!.contains)),
  );
  if (!branch) throw invalidScript('no branch of the turn holds for the last tool results', [`${step - 1}.branches`]);
  return branch;
}

export class ScriptedProvider implements ModelProvider {
  readonly name = 'scripted';
  /** One "model": the script. A choice naming the scripted provider is pinned to this id. */
  readonly defaultModel = 'scripted';
  readonly needsTranscript = false;
  /** Calls per (run, step): lets tests prove a journalled decision is never asked again. */
  calls = 0;

  /** Only a branching turn reads the transcript: every other step of a scripted run reads nothing more. */
  needsTranscriptFor(req: Pick<ModelRequest, 'script' | 'step'>): boolean {
    return Array.isArray(req.script) && isBranchingTurn(req.script[req.step - 1]);
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    this.calls++;
    const entry = entryOf(req.script, req.step);
    const turn = entry && 'branches' in entry ? branchOf(entry, req.transcript, req.step) : entry;
    if (!turn) return { toolCalls: [], final: 'Script finished.', usage: { promptTokens: 1, completionTokens: 1 } };
    if (req.attempt <= turn.transientFailures) {
      // It bills what its script says (failureUsage), else nothing: the scripted model does no work.
      throw new RetryableError('scripted transient failure (503)', undefined, {
        status: 503,
        usage: turn.failureUsage,
        reach: 'none',
      });
    }
    // Streaming on (MODEL_STREAMING): the final answer is handed on in pieces, as a model would write it.
    if (req.onTextDelta && turn.final) for (const piece of turn.final.match(/[^]{1,16}/g) ?? []) req.onTextDelta(piece);
    return {
      toolCalls: turn.toolCalls.map((c, i) => ({ id: `call_${req.step}_${i}`, name: c.name, args: c.args })),
      ...(turn.final !== undefined ? { final: turn.final } : {}),
      ...(turn.usage ? { usage: turn.usage } : {}),
    };
  }
}
