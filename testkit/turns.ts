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
