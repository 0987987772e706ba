/**
 * Plays scripted turns over a local model server's real wire (OpenAI Chat
 * Completions or Anthropic Messages), so a demo or a test runs the real AI SDK
 * providers over HTTP with the same decisions the scripted provider would make.
 * A request is matched to its run by the conversation's first user message
 * (the agent's prompt(input)) and to its step by the assistant turns already
 * in it: concurrent runs interleave freely.
 */
import type { Script, ScriptTurn } from '../../src/models/scriptedTurns.js';
import type { RecordedRequest, Reply } from './queue.js';

type Message = { role?: unknown; content?: unknown };

/** A message's text: a string, or the text blocks of a content array (both wires). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((b: { type?: unknown; text?: unknown }) => (b?.type === 'text' && typeof b.text === 'string' ? b.text : ''))
      .join('');
  return '';
}

/**
 * The scripts' plain turns, by prompt. A branching turn is refused with a TypeError: it reads the run's journalled tool
 * results, which a conversation on a vendor's wire carries in that vendor's own form.
 */
function plainScripts(scripts: ReadonlyMap<string, Script>): Map<string, ScriptTurn[]> {
  const plain = new Map<string, ScriptTurn[]>();
  for (const [prompt, script] of scripts)
    plain.set(
      prompt,
      script.map((entry, i) => {
        if ('branches' in entry) throw new TypeError(`scriptResponder: turn ${i + 1} is a branching turn`);
        return entry;
      }),
    );
  return plain;
}

/** Replies from `scripts` (by prompt); undefined for a conversation no script starts (the server's fallback answers). */
export function scriptResponder(scripts: ReadonlyMap<string, Script>): (req: RecordedRequest) => Reply | undefined {
  const plain = plainScripts(scripts);
  return (req) => {
    const messages = Array.isArray(req.body.messages) ? (req.body.messages as Message[]) : [];
    const prompt = textOf(messages.find((m) => m.role === 'user')?.content);
    const script = plain.get(prompt);
    if (!script) return undefined;
    const step = messages.filter((m) => m.role === 'assistant').length + 1;
    const turn = script[step - 1];
    if (!turn) return { kind: 'turn', text: 'Script finished.', usage: { input: 1, output: 1 } };
    return {
      kind: 'turn',
      ...(turn.final !== undefined ? { text: turn.final } : {}),
      toolCalls: turn.toolCalls.map((c) => ({ name: c.name, args: c.args })),
      usage: turn.usage ? { input: turn.usage.promptTokens, output: turn.usage.completionTokens } : null,
    };
  };
}
