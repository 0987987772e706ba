/** Scripted-model turns the engine tests share: each charges 10 + 5 tokens. */
export const usage = { promptTokens: 10, completionTokens: 5 };
export const read = { toolCalls: [{ name: 'read_ticket', args: {} }], usage, transientFailures: 0 };
export const final = { toolCalls: [], final: 'done', usage, transientFailures: 0 };
export const emailTurn = (body = 'On it.') => ({
  toolCalls: [{ name: 'send_email', args: { to: 'ada@example.com', template: 'ack', subject: 'Re', body } }],
  usage,
  transientFailures: 0,
});
export const email = emailTurn();
export const ticket = {
  toolCalls: [{ name: 'create_ticket', args: { subject: 'Follow-up', body: 'Broken mug', sourceTicketId: 'T-1' } }],
  usage,
  transientFailures: 0,
};

/** A turn of the given tool calls, 10 + 5 tokens (`extra`: e.g. `{ final: 'done' }`). */
export const turn = (toolCalls: { name: string; args: Record<string, unknown> }[], extra = {}) => ({
  toolCalls,
  usage,
  transientFailures: 0,
  ...extra,
});
/** Tool calls, for turn([...]). */
export const emailCall = {
  name: 'send_email',
  args: { to: 'ada@example.com', template: 'ack', subject: 'Re: broken mug', body: 'We are on it.' },
};
export const ticketCall = {
  name: 'create_ticket',
  args: { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'T' },
};
export const refundCall = (amountCents: number) => ({
  name: 'refund',
  args: { orderId: 'O-1', amountCents, currency: 'EUR', reason: 'broken mug' },
});
