/** The follow-up hook of defineAgent, with no Redis: the default previous conversation and an agent's own. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, FOLLOW_UP_EARLIER_MAX_CHARS, type PreviousRun } from '../../src/core/agent.js';

const base = {
  name: 'echo',
  version: 'echo@1',
  input: z.object({ text: z.string() }),
  tools: [],
  instructions: () => 'Echo.',
};
const previous = (over: Partial<PreviousRun<{ text: string }>> = {}): PreviousRun<{ text: string }> => ({
  runId: 'r_000000000000000000000001',
  status: 'completed',
  input: { text: 'first question' },
  final: 'first answer',
  journal: [],
  ...over,
});

describe('followUp', () => {
  it('by default: the earlier chain, then the previous first message (as the agent prompts it) and its final answer', () => {
    const agent = defineAgent({ ...base, prompt: (i) => `Q: ${i.text}` });
    const text = agent.followUp(previous({ earlier: 'EARLIER' }), { text: 'second' });
    expect(text).toContain('EARLIER');
    expect(text).toContain('User: Q: first question');
    expect(text).toContain('Assistant: first answer');
    expect(text.indexOf('EARLIER')).toBeLessThan(text.indexOf('User:'));
  });

  it('by default: a previous run without a final answer says how it ended; a long chain keeps its tail', () => {
    const agent = defineAgent(base);
    expect(agent.followUp(previous({ final: undefined, status: 'needs_human' }), { text: 'x' })).toContain(
      '(no final answer: the run ended needs_human)',
    );
    const long = `HEAD${'x'.repeat(FOLLOW_UP_EARLIER_MAX_CHARS)}TAIL`;
    const text = agent.followUp(previous({ earlier: long }), { text: 'x' });
    expect(text).toContain('TAIL');
    expect(text).not.toContain('HEAD');
  });

  it("an agent's own hook decides the text", () => {
    const agent = defineAgent({ ...base, followUp: (p, input) => `${p.final} -> ${input.text}` });
    expect(agent.followUp(previous(), { text: 'second' })).toBe('first answer -> second');
  });
});
