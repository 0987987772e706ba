/** Table test of the ledger state machine: every move not allowed by states.ts is refused by the Lua CAS. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ALLOWED_MOVES, LEDGER_STATES, type LedgerState } from '../../src/ledger/states.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { createSupportTools } from '../../src/agents/support/tools/index.js';
import type { WriteTool } from '../../src/core/tool.js';

// Identities only: no request is sent, the service is never called.
const tools = createSupportTools({ baseUrl: 'http://127.0.0.1:9' });
const tool = (name: string) => tools.find((t) => t.name === name) as WriteTool;
const refundTool = tool('refund');
const sendEmail = tool('send_email');
const createTicket = tool('create_ticket');

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('states');
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

/** Puts a fresh action into `state` by writing the hash field directly (test setup only). */
async function actionIn(state: LedgerState, n: number): Promise<{ runId: string; actionId: string }> {
  const runId = `r_states${n}`;
  const id = actionIdentity(runId, sendEmail, { to: 'a@b.co', template: 't', subject: 's', body: 'b' });
  await ledger.plan(runId, 1, 'c', 'send_email', id, {}, 'test');
  await h.ctx.redis.hset(h.ctx.keys.action(runId, id.actionId), 'state', state);
  return { runId, actionId: id.actionId };
}

describe('ledger state machine', () => {
  let n = 0;
  for (const from of LEDGER_STATES) {
    for (const to of LEDGER_STATES) {
      const allowed = ALLOWED_MOVES[from].includes(to);
      it(`${from} -> ${to} is ${allowed ? 'allowed' : 'refused'}`, async () => {
        const { runId, actionId } = await actionIn(from, ++n);
        const move = ledger.transition(runId, actionId, from, to, { by: 'test', why: 'table' });
        if (allowed) {
          await move;
          expect((await ledger.get(runId, actionId))?.state).toBe(to);
        } else {
          await expect(move).rejects.toMatchObject({ code: 'illegal_transition' });
          expect((await ledger.get(runId, actionId))?.state).toBe(from);
        }
      });
    }
  }

  it('dispatched never goes back to planned, and a stale compare-and-set loses', async () => {
    const { runId, actionId } = await actionIn('dispatched', 999);
    await expect(
      ledger.transition(runId, actionId, 'dispatched', 'planned', { by: 't', why: 'x' }),
    ).rejects.toMatchObject({ code: 'illegal_transition' });
    await ledger.transition(runId, actionId, 'dispatched', 'confirmed', { by: 'a', why: 'first' });
    await expect(
      ledger.transition(runId, actionId, 'dispatched', 'outcome_unknown', { by: 'b', why: 'late' }),
    ).rejects.toMatchObject({ code: 'ledger_conflict', actual: 'confirmed' });
  });

  it('action ids and keys are stable, derived from run and business action, not the wording', () => {
    const a = actionIdentity('r_1', sendEmail, { to: 'a@b.co', template: 'ack', subject: 'Hi', body: 'one' });
    const b = actionIdentity('r_1', sendEmail, { body: 'two', subject: 'Hello', template: 'ack', to: 'a@b.co' });
    const c = actionIdentity('r_2', sendEmail, { to: 'a@b.co', template: 'ack', subject: 'Hi', body: 'one' });
    expect(a.actionId).toBe(b.actionId);
    expect(a.idempotencyKey).toBe(b.idempotencyKey);
    expect(a.fingerprint).not.toBe(b.fingerprint);
    expect(c.actionId).not.toBe(a.actionId);
    const t = actionIdentity('r_1', createTicket, { subject: 'S', body: 'B', priority: 'normal', sourceTicketId: 'T' });
    expect(t.actionId).not.toBe(a.actionId);
  });

  it('identities normalise what does not change the business action: recipient case and spacing, subject spacing and case, currency case', () => {
    const mail = (to: string) => actionIdentity('r_1', sendEmail, { to, template: 'ack', subject: 'Hi', body: 'one' });
    const carol = mail('carol@example.com');
    for (const to of ['Carol@Example.com', 'CAROL@EXAMPLE.COM', ' carol@example.com ']) {
      expect(mail(to).actionId, to).toBe(carol.actionId);
      expect(mail(to).idempotencyKey, to).toBe(carol.idempotencyKey);
    }
    expect(mail('carol2@example.com').actionId).not.toBe(carol.actionId);

    const ticket = (subject: string, sourceTicketId = 'T-1') =>
      actionIdentity('r_1', createTicket, { subject, body: 'B', priority: 'normal', sourceTicketId }).actionId;
    expect(ticket('Refund  request ')).toBe(ticket('refund request'));
    expect(ticket('refund request', ' T-1')).toBe(ticket('refund request'));
    expect(ticket('refund requested')).not.toBe(ticket('refund request'));

    const money = (currency: string, orderId = 'O-1') =>
      actionIdentity('r_1', refundTool, { orderId, amountCents: 500, currency, reason: 'r' }).actionId;
    expect(money('eur')).toBe(money('EUR'));
    expect(money('EUR', ' O-1 ')).toBe(money('EUR'));
    expect(money('USD')).not.toBe(money('EUR'));
    expect(money('EUR', 'o-1')).not.toBe(money('EUR'));
  });
});
