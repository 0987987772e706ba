/**
 * What an erasure keeps of a ledger move's evidence and of an event payload (src/archive/redact.ts): the strings of
 * the audit fields at the top (an error code, a status, a receipt, the ids), never a string nested deeper, whatever
 * its name: a service's answer kept inside evidence (`{to: <email>, reason: 'customer wrote: ...'}`) uses the same
 * names for the customer's text.
 */
import { describe, expect, it } from 'vitest';
import { ERASED, redactEventData, redactHistory } from '../../src/archive/redact.js';
import { redactEventFields } from '../../src/archive/erasure.js';
import { decodeEntry } from '../../src/store/runEvents.js';

const EMAIL = 'jo.secret@example.com';
const WORDS = 'customer wrote: my card 4111 was stolen';

describe("an erasure's audit fields", () => {
  it("keeps a move's top-level audit strings and erases every nested string, audit names included", () => {
    const move = {
      from: 'dispatched',
      to: 'outcome_unknown',
      at: 1,
      by: 'w-1',
      why: 'no definite answer from the service',
      evidence: {
        error: 'service answered 500',
        status: 500,
        reason: 'timeout_or_reset',
        receipt: 're_123',
        body: { to: EMAIL, reason: WORDS, error: { type: 'db_error', code: 'E1', message: `lookup for ${EMAIL}` } },
        last: { lookup: { why: 'the lookup failed', evidence: { status: 502, reason: WORDS } } },
      },
    };
    const redacted = redactHistory(move);
    expect(redacted).toEqual({
      ...move,
      evidence: {
        error: ERASED,
        status: 500,
        reason: 'timeout_or_reset',
        receipt: 're_123',
        body: { to: ERASED, reason: ERASED, error: { type: ERASED, code: ERASED, message: ERASED } },
        last: { lookup: { why: ERASED, evidence: { status: 502, reason: ERASED } } },
      },
    });
    expect(JSON.stringify(redacted.evidence)).not.toMatch(/jo\.secret|4111/);
  });

  it("keeps an event payload's top-level audit strings only", () => {
    const data = JSON.stringify({ actionId: 'a_1', tool: 'send_email', to: 'confirmed', extra: { to: EMAIL } });
    expect(JSON.parse(redactEventData(data))).toEqual({
      actionId: 'a_1',
      tool: 'send_email',
      to: 'confirmed',
      extra: { to: ERASED },
    });
  });
});

describe("an erasure's stream entries", () => {
  it("redacts each of a step's three events held in one field as it redacts a data field, and keeps them three", () => {
    const started = JSON.stringify({ step: 2, worker: EMAIL });
    const decision = JSON.stringify({ step: 2, tools: [WORDS], final: false });
    const committed = JSON.stringify({ step: 2, status: 'running', entries: 2 });
    const asFields = redactEventFields(['type', 'step_started', 'data', started, 'type', 'decision', 'data', decision]);
    const asStep = redactEventFields(['step', [started, decision, committed].join('\x1e')]);
    const events = decodeEntry('1-0', asStep);
    expect(events.map((e) => e.type)).toEqual(['step_started', 'decision', 'step_committed']);
    expect(events.map((e) => e.data)).toEqual([asFields[3], asFields[7], redactEventData(committed)]);
    expect(asStep.join()).not.toContain(EMAIL);
    expect(asStep.join()).not.toContain(WORDS);
  });
});
