/**
 * Deterministic provider: plays the run's script (or the built-in support
 * agent), turn i at step i. Past the end of the script it answers a final
 * message. Transient failures and missing usage are scripted, for tests.
 */
import { RetryableError } from '../core/errors.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../core/model.js';
import type { Script } from './script.js';
import { supportScript } from '../agents/support/script.js';
import { ticketOf } from '../agents/support/ticket.js';

export class ScriptedProvider implements ModelProvider {
  readonly name = 'scripted';
  readonly needsTranscript = false;
  /** Calls per (run, step): lets tests prove a journalled decision is never asked again. */
  calls = 0;

  async complete(req: ModelRequest): Promise<ModelTurn> {
    this.calls++;
    // The run's script was validated when the run was created and when its spec was read back.
    const script: Script = (req.script as Script | undefined) ?? supportScript(ticketOf(req.input));
    const turn = script[req.step - 1];
    if (!turn) return { toolCalls: [], final: 'Script finished.', usage: { promptTokens: 1, completionTokens: 1 } };
    if (req.attempt <= turn.transientFailures) {
      throw new RetryableError('scripted transient failure (503)', undefined, { status: 503, usage: turn.failureUsage });
    }
    return {
      toolCalls: turn.toolCalls.map((c, i) => ({ id: `call_${req.step}_${i}`, name: c.name, args: c.args })),
      ...(turn.final !== undefined ? { final: turn.final } : {}),
      ...(turn.usage ? { usage: turn.usage } : {}),
    };
  }
}
