/**
 * Deterministic provider: plays the request's script (the run's own, else its
 * agent's demoScript), turn i at step i. Past the end of the script it answers
 * a final message. Transient failures and missing usage are scripted, for tests.
 */
import { RetryableError, TerminalError } from '../core/errors.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../core/model.js';
import { scriptSchema, type Script } from './scriptedTurns.js';
import { parseOnce } from '../core/parseOnce.js';

/** A script, validated once per object (a run's spec, and so its script, is cached by the worker). */
const validScript = parseOnce(scriptSchema, 'the script is not a valid script');

/**
 * The request's script, validated; none, or an invalid one, is a TerminalError (`invalid_input`): no retry makes one.
 */
function scriptOf(raw: unknown): Script {
  if (raw === undefined)
    throw new TerminalError('invalid_input', 'no script: the run brought none and its agent has no demoScript');
  return validScript(raw);
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
    const script = scriptOf(req.script);
    const turn = script[req.step - 1];
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
