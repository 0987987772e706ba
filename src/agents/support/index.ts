/**
 * The built-in support agent, on the same API a team's own agent uses
 * (src/core/agent.ts): a ticket in, its tools (reads, writes, a wait for the
 * customer's reply and a sleep), the prompt, the compensation wording, and the
 * scripted turns of the demo.
 */
import { defineAgent, FOLLOW_UP_EARLIER_MAX_CHARS, type Agent } from '../../core/agent.js';
import type { ServiceOptions } from '../../core/httpJson.js';
import type { Tool } from '../../core/tool.js';
import type { SupportServices } from './vendors/index.js';
import { clarificationEmail } from './compensation.js';
import { supportScript } from './scriptedModel.js';
import { ticketSchema, type Ticket } from './ticket.js';
import { createSupportTools } from './tools/index.js';
import { supportIntake } from './intake.js';

export const SUPPORT_AGENT_NAME = 'support';
/** Pinned by every run (with the tools' schema hash): change it when the behaviour changes. */
export const SUPPORT_AGENT_VERSION = 'support-agent@2';

/**
 * `services`: each vendor's URL, credentials and timeout (`{ baseUrl }`: all at the sandbox, development and tests).
 * `moreTools`: a deployment's own tools (an agent tool handing work to its other agents, say), after the built-in
 * ones: they change the tools' schema hash every run pins, so give them from the first run on.
 */
export function supportAgent(
  services: SupportServices | ServiceOptions,
  moreTools: readonly Tool[] = [],
): Agent<Ticket> {
  return defineAgent<Ticket>({
    name: SUPPORT_AGENT_NAME,
    version: SUPPORT_AGENT_VERSION,
    input: ticketSchema,
    tools: [...createSupportTools(services), ...moreTools],
    instructions: () =>
      'You are a support agent. Use the tools to resolve the ticket, then answer with a short final summary.',
    prompt: (t) => `Ticket ${t.id}: ${t.subject}\n\n${t.body}\n\nCustomer: ${t.customer.name} <${t.customer.email}>`,
    // The ticket is the subject: each event on it (a customer's reply) is a run, linked to the ticket's run before it.
    key: (t) => t.id,
    // What people know a ticket's runs by besides the ticket: the customer (searchable in the API and console).
    search: (t) => ({ customer: t.customer.email, ticket: t.id }),
    // A reply's run sees the earlier exchanges on the ticket: what the customer wrote and what was answered.
    followUp: (previous) =>
      [
        ...(previous.earlier ? [previous.earlier.slice(-FOLLOW_UP_EARLIER_MAX_CHARS)] : []),
        `Earlier on this ticket the customer wrote:\n${previous.input.body}`,
        `The answer was: ${previous.final ?? `(none: that run ended ${previous.status})`}`,
      ].join('\n\n'),
    compensationFor: (action, ticket) => clarificationEmail(action, ticket),
    demoScript: (t) => supportScript(t),
    intake: supportIntake,
  });
}
