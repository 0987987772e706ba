/**
 * An example of agents that call agents: a triage agent reads a customer's message and hands a refund to a
 * refunds agent (defineAgentTool). The refund is a child run of its own (its own run id, journal and budget,
 * carved out of the triage run's); the triage run waits `waiting_child`, holding no worker, and gets the refunds
 * agent's final answer as the tool's result, or its stop reason as a tool error.
 *
 *   AGENTS_MODULE=examples/triage-refunds/index.ts npm run worker
 */
import { z } from 'zod';
import { defineAgent, defineAgentTool, defineReadTool } from '../../src/index.js';

/** Refunds above this need a person: the refunds agent says so instead of approving. */
const AUTO_REFUND_MAX_CENTS = 50_00;

const refundSchema = z
  .object({
    orderId: z.string().min(1).max(100),
    amountCents: z.number().int().positive().max(10_000_00),
    reason: z.string().min(1).max(500),
  })
  .strict();
type Refund = z.infer<typeof refundSchema>;

const ticketSchema = z
  .object({
    ticketId: z.string().min(1).max(100),
    text: z.string().min(1).max(5000),
    orderId: z.string().min(1).max(100),
    amountCents: z.number().int().positive().max(10_000_00),
  })
  .strict();
type Ticket = z.infer<typeof ticketSchema>;

/** The refund policy, as a read: whether this amount is refunded without a person. */
const checkRefundPolicy = defineReadTool({
  name: 'check_refund_policy',
  description: 'Whether a refund of this amount is approved without a person.',
  args: z.object({ amountCents: z.number().int().positive() }).strict(),
  execute: async ({ amountCents }) => ({
    approved: amountCents <= AUTO_REFUND_MAX_CENTS,
    limit: AUTO_REFUND_MAX_CENTS,
  }),
});

/** The triage agent's hand-off: a child run of the refunds agent, at most 4 steps of it. */
const handToRefunds = defineAgentTool({
  name: 'hand_to_refunds',
  description: 'Hand a refund request to the refunds agent; its answer comes back.',
  args: refundSchema,
  agent: 'refunds',
  input: (a) => ({ orderId: a.orderId, amountCents: a.amountCents, reason: a.reason }),
  budget: () => ({ maxSteps: 4 }),
});

const usage = { promptTokens: 60, completionTokens: 10 };

export const refunds = defineAgent<Refund>({
  name: 'refunds',
  version: 'refunds@1',
  input: refundSchema,
  tools: [checkRefundPolicy],
  instructions: () => 'Check the refund policy for the amount, then answer in one line: approved or for a person.',
  prompt: (r) => `Refund ${r.amountCents} cents on order ${r.orderId}: ${r.reason}`,
  key: (r) => r.orderId,
  demoScript: (r) => [
    { toolCalls: [{ name: 'check_refund_policy', args: { amountCents: r.amountCents } }], usage },
    {
      toolCalls: [],
      final:
        r.amountCents <= AUTO_REFUND_MAX_CENTS
          ? `Refund of ${r.amountCents} cents on ${r.orderId} approved.`
          : `Refund of ${r.amountCents} cents on ${r.orderId} needs a person.`,
      usage,
    },
  ],
});

export const triage = defineAgent<Ticket>({
  name: 'triage',
  version: 'triage@1',
  input: ticketSchema,
  tools: [handToRefunds],
  instructions: () => 'Read the message. A refund request goes to the refunds agent; then answer the customer.',
  prompt: (t) => `Ticket ${t.ticketId} about order ${t.orderId}: ${t.text}`,
  key: (t) => t.ticketId,
  demoScript: (t) => [
    {
      toolCalls: [
        { name: 'hand_to_refunds', args: { orderId: t.orderId, amountCents: t.amountCents, reason: t.text } },
      ],
      usage,
    },
    { toolCalls: [], final: 'Your refund request was handled; you will hear from us shortly.', usage },
  ],
});

export default [triage, refunds];
