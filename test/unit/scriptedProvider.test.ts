import { describe, expect, it } from 'vitest';
import { TerminalError } from '../../src/core/errors.js';
import type { ModelRequest } from '../../src/core/model.js';
import { ScriptedProvider } from '../../src/models/scripted.js';

const usage = { promptTokens: 3, completionTokens: 2 };

function request(step: number, script: unknown): ModelRequest {
  return {
    runId: 'r_1',
    step,
    attempt: 1,
    instructions: '',
    prompt: '',
    tools: [],
    maxCompletionTokens: 100,
    script,
    signal: new AbortController().signal,
  };
}

async function refusal(step: number, script: unknown): Promise<TerminalError> {
  const err = await new ScriptedProvider().complete(request(step, script)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(TerminalError);
  return err as TerminalError;
}

describe('ScriptedProvider', () => {
  it('plays turn i at step i, with the schema defaults, and a final message past the end', async () => {
    const script = [
      { toolCalls: [{ name: 'read_ticket' }], usage },
      { final: 'done', usage },
    ];
    const p = new ScriptedProvider();
    expect(await p.complete(request(1, script))).toEqual({
      toolCalls: [{ id: 'call_1_0', name: 'read_ticket', args: {} }],
      usage,
    });
    expect(await p.complete(request(2, script))).toEqual({ toolCalls: [], final: 'done', usage });
    expect((await p.complete(request(3, script))).final).toBe('Script finished.');
  });

  it('validates the turn it plays: a bad turn fails its own step, naming where, and no step before it', async () => {
    const script = [{ final: 'ok', usage }, { final: 'ok', usage, extra: 1 }, { toolCalls: [{ name: '' }] }];
    expect((await new ScriptedProvider().complete(request(1, script))).final).toBe('ok');
    const second = await refusal(2, script);
    expect(second.code).toBe('invalid_input');
    expect(second.details.issues).toEqual(['1']);
    expect((await refusal(3, script)).details.issues).toEqual(['2.toolCalls.0.name']);
  });

  it('refuses no script, and a script that is not a list of 1 to 1000 turns, at any step', async () => {
    expect((await refusal(1, undefined)).message).toMatch(/no script/);
    for (const script of [{}, 'turns', [], Array.from({ length: 1001 }, () => ({ final: 'x' }))]) {
      const err = await refusal(5, script);
      expect(err.code).toBe('invalid_input');
      expect(err.details.issues).toEqual(['a list of 1 to 1000 turns']);
    }
  });
});
