/**
 * Deterministic provider: plays the request's script (the run's own, else its
 * agent's demoScript), turn i at step i. Past the end of the script it answers
 * a final message. Transient failures and missing usage are scripted, for tests.
 */
import { RetryableError, TerminalError } from '../core/errors.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../core/model.js';
import { SCRIPT_MAX_TURNS, scriptTurnSchema, type ScriptTurn } from './scriptedTurns.js';

const INVALID = 'the script is not a valid script';

/**
 * The turn of step `step` (undefined past the script's end), validated when it is played: one turn a step. Validating
 * the whole script kept a parsed copy of every turn per run and per worker process, and a run's steps land on every
 * worker of the fleet. No script, or an invalid one, is a TerminalError (`invalid_input`): no retry makes one. The
 * intake validated the whole script already (src/producer/schemas.ts); this guards what Redis hands back.
 */
function turnOf(raw: unknown, step: number): ScriptTurn | undefined {
  if (raw === undefined)
    throw new TerminalError('invalid_input', 'no script: the run brought none and its agent has no demoScript');
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > SCRIPT_MAX_TURNS)
    throw new TerminalError('invalid_input', INVALID, { issues: [`a list of 1 to ${SCRIPT_MAX_TURNS} turns`] });
  if (step > raw.length) return undefined;
  const r = scriptTurnSchema.safeParse(raw[step - 1]);
  if (!r.success)
    throw new TerminalError('invalid_input', INVALID, {
      issues: r.error.issues.map((i) => [step - 1, ...i.path].join('.')),
    });
  return r.data;
}

export class ScriptedProvider implements ModelProvider {
  readonly name = 'scripted';
  /** One "model": the script. A choice naming the scripted provider is pinned to this id. */
  readonly defaultModel = 'scripted';
  readonly needsTranscript = false;
  /** Calls per (run, step): lets tests prove a journalled decision is never asked again. */
  calls = 0;

  async complete(req: ModelRequest): Promise<ModelTurn> {
    this.calls++;
    const turn = turnOf(req.script, req.step);
    if (!turn) return { toolCalls: [], final: 'Script finished.', usage: { promptTokens: 1, completionTokens: 1 } };
    if (req.attempt <= turn.transientFailures) {
      throw new RetryableError('scripted transient failure (503)', undefined, {
        status: 503,
        usage: turn.failureUsage,
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
