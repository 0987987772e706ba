/**
 * An example of agents that call agents: a triage agent reads a customer's message and hands a refund to a
 * refunds agent (defineAgentTool). The refund is a child run of its own (its own run id, journal and budget,
 * carved out of the triage run's); the triage run waits `waiting_child`, holding no worker, and gets the refunds
 * agent's final answer as the tool's result, or its stop reason as a tool error.
 *
 * The triage agent reads that outcome before it answers the customer. The refunds agent's answer starts with its
 * verdict, `refunded:` or `needs_person:`; only `refunded:` lets triage tell the customer the refund was made. A
 * `needs_person:` verdict, a child that stopped (a tool error: failed, budget_exceeded, cancelled, needs_human) or
 * any other answer is escalated: triage opens a task for a person in the help desk (hand_to_person, a write through
 * the effect ledger, once per ticket) and tells the customer a person will follow up.
 *
 *   AGENTS_MODULE=examples/triage-refunds/index.ts npm run worker
 *
 * Settings: DESK_URL (the help desk's Zendesk ticket API; default SANDBOX_URL, the bundled sandbox) and DESK_TOKEN
 * (its OAuth token; required in production, the sandbox accepts any in development).
 */
import { z } from 'zod';
import { defineAgent, defineAgentTool, defineAgentsModule, defineReadTool } from '../../src/index.js';
import { handToPerson, type DeskOptions } from './desk.js';

/** Refunds above this need a person: the refunds agent says so instead of approving. */
export const AUTO_REFUND_MAX_CENTS = 50_00;

/**
 * The refunds agent's verdicts: its final answer starts with one, then a colon. The triage agent acts on
 * `refunded` alone; anything else goes to a person.
 */
export const VERDICTS = { refunded: 'refunded', needsPerson: 'needs_person' } as const;

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
  version: 'refunds@2',
  input: refundSchema,
  tools: [checkRefundPolicy],
  instructions: () =>
    'Check the refund policy for the amount, then answer in one line that starts with your verdict: ' +
    `"${VERDICTS.refunded}:" when the policy approves it, "${VERDICTS.needsPerson}:" otherwise.`,
  prompt: (r) => `Refund ${r.amountCents} cents on order ${r.orderId}: ${r.reason}`,
  key: (r) => r.orderId,
  demoScript: (r) => [
    { toolCalls: [{ name: 'check_refund_policy', args: { amountCents: r.amountCents } }], usage },
    {
      toolCalls: [],
      final:
        r.amountCents <= AUTO_REFUND_MAX_CENTS
          ? `${VERDICTS.refunded}: refund of ${r.amountCents} cents on ${r.orderId} approved.`
          : `${VERDICTS.needsPerson}: refund of ${r.amountCents} cents on ${r.orderId} is above the ${AUTO_REFUND_MAX_CENTS}-cent limit.`,
      usage,
    },
  ],
});

/** What triage tells the customer: the refund made, or a person following up. */
export const CUSTOMER_REPLIES = {
  refunded: 'Your refund has been made; you will see it on your statement within a few days.',
  person: 'A person from our refunds team will look at your request and follow up with you.',
};

/** The triage agent, its hand-off to a person opening tasks in `desk`. */
export function triageAgent(desk: DeskOptions) {
  return defineAgent<Ticket>({
    name: 'triage',
    version: 'triage@2',
    input: ticketSchema,
    tools: [handToRefunds, handToPerson(desk)],
    instructions: () =>
      'Read the message. A refund request goes to the refunds agent. Tell the customer the refund was made only ' +
      `when its answer starts with "${VERDICTS.refunded}:". On any other answer, or when it stopped (a tool error), ` +
      'hand the ticket to a person (hand_to_person) and tell the customer a person will follow up.',
    prompt: (t) => `Ticket ${t.ticketId} about order ${t.orderId}: ${t.text}`,
    key: (t) => t.ticketId,
    demoScript: (t) => [
      {
        toolCalls: [
          { name: 'hand_to_refunds', args: { orderId: t.orderId, amountCents: t.amountCents, reason: t.text } },
        ],
        usage,
      },
      // The refunds agent's outcome picks the turn: its answer's verdict, or anything else (a stop) for a person.
      {
        branches: [
          {
            whenLastToolResult: { contains: `"answer":"${VERDICTS.refunded}:` },
            toolCalls: [],
            final: CUSTOMER_REPLIES.refunded,
            usage,
          },
          {
            toolCalls: [
              {
                name: 'hand_to_person',
                args: {
                  ticketId: t.ticketId,
                  orderId: t.orderId,
                  amountCents: t.amountCents,
                  why: 'The refunds agent did not make this refund (its verdict, or its stop, is in the triage run).',
                },
              },
            ],
            usage,
          },
        ],
      },
      // Played only after the hand-off to a person (the refunded branch ended the run with its answer).
      { toolCalls: [], final: CUSTOMER_REPLIES.person, usage },
    ],
  });
}

/** AGENTS_MODULE entry: the help desk is the module's own setting, validated at boot. */
export default defineAgentsModule({
  settings: ({ config }) => {
    const url = z.url();
    const production = config.APP_MODE === 'production';
    const required = (why: string) => z.string({ error: `required in production (${why})` }).min(1);
    return z.object({
      /** The bundled sandbox, the desk where DESK_URL is unset (development only). */
      SANDBOX_URL: url.default('http://127.0.0.1:4010'),
      DESK_URL: production ? required('the help desk the triage agent hands refunds to').pipe(url) : url.optional(),
      DESK_TOKEN: production ? required("the help desk's OAuth token") : z.string().min(1).default('sandbox-token'),
    });
  },
  agents: ({ settings }) => [
    triageAgent({ baseUrl: settings.DESK_URL ?? settings.SANDBOX_URL, token: settings.DESK_TOKEN }),
    refunds,
  ],
});
