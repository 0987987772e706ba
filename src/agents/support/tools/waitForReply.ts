import { z } from 'zod';
import { defineWaitTool } from '../../../core/agent.js';
import type { WaitTool } from '../../../core/tool.js';
import { ticketOf } from '../ticket.js';

/** The most a run waits for a customer's reply (its wall-clock budget bounds it too). */
const MAX_HOURS = 7 * 24;

/**
 * The key a run waits on for the customer's next message on a ticket. The support intake names the same key for
 * every message on the ticket (src/agents/support/intake.ts), so a reply resumes the ticket's waiting run.
 */
export const replyKey = (ticketId: string): string => `reply:${ticketId}`;

/**
 * Waits for the customer's reply on the run's ticket (after a question sent by email, in the same turn or the one
 * before): the result is `{ event: { message } }`, or `{ timedOut: true }` when `hours` pass first. The run parks
 * `waiting_event` and holds no worker meanwhile.
 */
export const waitForReplyTool: WaitTool<{ hours: number }> = defineWaitTool({
  name: 'wait_for_reply',
  description: "Wait for the customer's reply on this ticket, at most `hours`.",
  args: z.object({ hours: z.number().positive().max(MAX_HOURS) }).strict(),
  wait: ({ hours }, ctx) => ({ kind: 'event', key: replyKey(ticketOf(ctx.input).id), timeoutMs: hours * 3600_000 }),
});
