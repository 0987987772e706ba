/**
 * The examples' demo scripts act on what their tools answered (pure, no Redis): the scripted model is given the
 * transcript a run would have at the branching step, and the turn it plays is the one the result calls for.
 */
import { describe, expect, it } from 'vitest';
import type { JournalEntry } from '../../src/core/journal.js';
import type { ModelTurn } from '../../src/core/model.js';
import { ScriptedProvider } from '../../src/models/scripted.js';
import { CUSTOMER_REPLIES, refunds, triageAgent } from '../../examples/triage-refunds/index.js';
import askAndWait, { NO_REPLY } from '../../examples/ask-and-wait/index.js';

const observation = (tool: string, status: string, output: unknown): JournalEntry => ({
  v: 1,
  kind: 'observation',
  step: 1,
  callId: 'call_1_0',
  tool,
  status,
  output,
});

function play(script: unknown, step: number, transcript: JournalEntry[]): Promise<ModelTurn> {
  return new ScriptedProvider().complete({
    runId: 'r_1',
    step,
    attempt: 1,
    instructions: '',
    prompt: '',
    tools: [],
    maxCompletionTokens: 100,
    script,
    transcript,
    signal: new AbortController().signal,
  });
}

describe('triage-refunds: triage acts on the refunds agent outcome', () => {
  const triage = triageAgent({ baseUrl: 'http://desk.invalid', token: 'unused' });
  const ticket = { ticketId: 'T-1', text: 'broken', orderId: 'O-1', amountCents: 90_00 };
  const script = triage.demoScript!(ticket);
  /** The child's answer for this amount, as its own demo script gives it. */
  const childAnswer = (amountCents: number) =>
    (refunds.demoScript!({ orderId: 'O-1', amountCents, reason: 'broken' }) as { final?: string }[])[1]!.final;

  it('a refunded verdict is told to the customer as made', async () => {
    const answer = childAnswer(20_00);
    expect(answer).toMatch(/^refunded: /);
    const turn = await play(script, 2, [observation('hand_to_refunds', 'ok', { childRunId: 'c', answer })]);
    expect(turn).toMatchObject({ toolCalls: [], final: CUSTOMER_REPLIES.refunded });
  });

  it('a needs_person verdict, a stopped child or any other answer is handed to a person, then told so', async () => {
    const answer = childAnswer(90_00);
    expect(answer).toMatch(/^needs_person: /);
    for (const result of [
      observation('hand_to_refunds', 'ok', { childRunId: 'c', answer }),
      observation('hand_to_refunds', 'tool_error', { error: 'child_failed', childRunId: 'c', status: 'failed' }),
      observation('hand_to_refunds', 'ok', { childRunId: 'c', answer: 'I refunded it, I think (refunded: yes)' }),
    ]) {
      const turn = await play(script, 2, [result]);
      expect(turn.final).toBeUndefined();
      expect(turn.toolCalls).toEqual([
        { id: 'call_2_0', name: 'hand_to_person', args: expect.objectContaining({ ticketId: 'T-1', orderId: 'O-1' }) },
      ]);
    }
    expect((await play(script, 3, [])).final).toBe(CUSTOMER_REPLIES.person);
  });
});

describe('ask-and-wait: the answer follows the wait result', () => {
  const script = askAndWait[0]!.demoScript!({ requestId: 'R-1', question: 'Size?' });

  it('a reply is thanked for; a timeout is not', async () => {
    const reply = observation('wait_for_reply', 'ok', { event: { text: 'M' } });
    expect((await play(script, 2, [reply])).final).toBe('Thanks for your reply.');
    const timeout = observation('wait_for_reply', 'ok', { timedOut: true });
    expect((await play(script, 2, [timeout])).final).toBe(NO_REPLY);
  });
});
