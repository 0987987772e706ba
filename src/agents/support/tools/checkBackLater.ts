import { z } from 'zod';
import { defineWaitTool } from '../../../core/agent.js';
import type { WaitTool } from '../../../core/tool.js';

/** The longest sleep (the run's wall-clock budget bounds it too: a sleep past its deadline stops the run). */
const MAX_HOURS = 72;

/**
 * Sleeps the run, then the model looks at the ticket again ("we will check in two days"): the result is
 * `{ sleptUntil }`. The run parks `sleeping` and holds no worker meanwhile.
 */
export const checkBackLaterTool: WaitTool<{ hours: number }> = defineWaitTool({
  name: 'check_back_later',
  description: 'Sleep for `hours`, then look at the ticket again.',
  args: z.object({ hours: z.number().positive().max(MAX_HOURS) }).strict(),
  wait: ({ hours }) => ({ kind: 'sleep', forMs: hours * 3600_000 }),
});
