import { describe, expect, it } from 'vitest';
import { TerminalError } from '../../src/core/errors.js';
import type { JournalEntry } from '../../src/core/journal.js';
import type { ModelRequest } from '../../src/core/model.js';
import { ScriptedProvider } from '../../src/models/scripted.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';

const usage = { promptTokens: 3, completionTokens: 2 };

function request(step: number, script: unknown, transcript?: JournalEntry[]): ModelRequest {
  return {
    ...(transcript ? { transcript } : {}),
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

async function refusal(step: number, script: unknown, transcript?: JournalEntry[]): Promise<TerminalError> {
  const err = await new ScriptedProvider().complete(request(step, script, transcript)).catch((e: unknown) => e);
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

  describe('a branching turn: the first branch whose condition holds on the last tool results', () => {
    const observation = (step: number, status: string, output: unknown): JournalEntry => ({
      v: 1,
      kind: 'observation',
      step,
      callId: `call_${step}_0`,
      tool: 'ask',
      status,
      output,
    });
    const script = [
      { toolCalls: [{ name: 'ask' }], usage },
      {
        branches: [
          { whenLastToolResult: { contains: '"answer":"yes' }, final: 'it said yes', usage },
          { whenLastToolResult: { contains: 'tool_error' }, final: 'it stopped', usage },
          { toolCalls: [{ name: 'escalate', args: { why: 'other' } }], usage },
        ],
      },
    ];

    it('plays the branch the results select, the unconditional one last', async () => {
      const p = new ScriptedProvider();
      const play = (t: JournalEntry[]) => p.complete(request(2, script, t));
      expect((await play([observation(1, 'ok', { answer: 'yes: done' })])).final).toBe('it said yes');
      expect((await play([observation(1, 'tool_error', { error: 'child_failed' })])).final).toBe('it stopped');
      expect(await play([observation(1, 'ok', { answer: 'no' })])).toEqual({
        toolCalls: [{ id: 'call_2_0', name: 'escalate', args: { why: 'other' } }],
        usage,
      });
    });

    it('looks only at the last step that has tool results, any of its calls', async () => {
      const p = new ScriptedProvider();
      const older = observation(1, 'ok', { answer: 'yes' });
      const last = [
        observation(3, 'ok', { answer: 'no' }),
        { ...observation(3, 'ok', { answer: 'yes!' }), callId: 'c2' },
      ];
      expect((await p.complete(request(2, script, [older, observation(3, 'ok', { answer: 'no' })]))).final).toBe(
        undefined,
      );
      expect((await p.complete(request(2, script, [older, ...last]))).final).toBe('it said yes');
    });

    it('asks for the transcript at a branching step only', () => {
      const p = new ScriptedProvider();
      expect(p.needsTranscript).toBe(false);
      expect(p.needsTranscriptFor({ script, step: 1 })).toBe(false);
      expect(p.needsTranscriptFor({ script, step: 2 })).toBe(true);
      expect(p.needsTranscriptFor({ script, step: 3 })).toBe(false);
      expect(p.needsTranscriptFor({ script: undefined, step: 1 })).toBe(false);
    });

    it('no branch holding fails the step invalid_input, naming the turn; so does a bad branch', async () => {
      const conditional = [{ branches: [{ whenLastToolResult: { contains: 'x' }, final: 'x' }] }];
      const none = await refusal(1, conditional, []);
      expect(none.code).toBe('invalid_input');
      expect(none.details.issues).toEqual(['0.branches']);
      const bad = await refusal(1, [{ branches: [{ whenLastToolResult: { contains: '' } }] }], []);
      expect(bad.details.issues).toEqual(['0.branches.0.whenLastToolResult.contains']);
    });

    it('the intake schema accepts branches and names the field of a bad one', () => {
      expect(scriptSchema.safeParse(script).success).toBe(true);
      const r = scriptSchema.safeParse([{ final: 'a' }, { branches: [{ final: 'b', extra: 1 }] }, { toolCalls: [{}] }]);
      expect(r.error?.issues.map((i) => i.path.join('.'))).toEqual(['1.branches.0', '2.toolCalls.0.name']);
    });
  });
});
