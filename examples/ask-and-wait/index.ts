/**
 * An example agent that waits: it asks a question and waits for the answer as an event on a key
 * (POST /v1/events {tenant, agent: 'ask-and-wait', key: `reply:<requestId>`, payload}), or sleeps before checking back.
 * No worker is held while it waits; the wait survives worker and Redis restarts.
 *
 *   AGENTS_MODULE=examples/ask-and-wait/index.ts npm run worker
 */
import { z } from 'zod';
import { defineAgent, defineWaitTool } from '../../src/index.js';

const requestSchema = z.object({ requestId: z.string().min(1).max(100), question: z.string().min(1) }).strict();
type Request = z.infer<typeof requestSchema>;

/** Waits for the reply to a request, at most `timeoutSeconds`: the result is `{ event: reply }` or `{ timedOut: true }`. */
const waitForReply = defineWaitTool({
  name: 'wait_for_reply',
  description: 'Wait for the customer to reply to the request.',
  args: z.object({
    requestId: z.string().min(1).max(100),
    timeoutSeconds: z
      .number()
      .positive()
      .max(7 * 86400),
  }),
  wait: ({ requestId, timeoutSeconds }) => ({
    kind: 'event',
    key: `reply:${requestId}`,
    timeoutMs: timeoutSeconds * 1000,
  }),
});

/** Sleeps, then the model is asked again: the result is `{ sleptUntil }`. */
const checkBackLater = defineWaitTool({
  name: 'check_back_later',
  description: 'Sleep, then continue.',
  args: z.object({
    seconds: z
      .number()
      .positive()
      .max(7 * 86400),
  }),
  wait: ({ seconds }) => ({ kind: 'sleep', forMs: seconds * 1000 }),
});

export default [
  defineAgent<Request>({
    name: 'ask-and-wait',
    version: 'ask-and-wait@1',
    input: requestSchema,
    tools: [waitForReply, checkBackLater],
    instructions: () => 'Ask the question, wait for the reply, then answer in one line.',
    prompt: (r) => `Request ${r.requestId}: ${r.question}`,
    key: (r) => r.requestId,
    demoScript: (r) => [
      { toolCalls: [{ name: 'wait_for_reply', args: { requestId: r.requestId, timeoutSeconds: 60 } }], usage },
      // The wait's result picks the answer: a reply, or the timeout (no reply is not thanked for).
      {
        branches: [
          { whenLastToolResult: { contains: '"timedOut":true' }, final: NO_REPLY, usage },
          { final: 'Thanks for your reply.', usage },
        ],
      },
    ],
  }),
];

const usage = { promptTokens: 50, completionTokens: 5 };
/** The answer when the wait timed out. */
export const NO_REPLY = 'No reply came in time; we will ask again.';
