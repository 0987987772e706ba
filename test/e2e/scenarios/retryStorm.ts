/**
 * Retry storm: the write endpoint answers 429 (a saturated rate limiter) and
 * then 201, and the agent, told to "make it pass", keeps asking for the same
 * write step after step with a growing context. Here the 429 is retried in
 * code with the same idempotency key (the model never sees it), the repeats
 * are answered from the ledger without a request, and after
 * LOOP_REPEAT_LIMIT repeats the run stops `needs_human` / `loop_detected`.
 * The service even ignores Idempotency-Key, like a vendor without keys: one write
 * anyway, because the ledger never sends the repeat.
 */
import type { FaultRule } from '../../../sandbox/types.js';
import { decisionSteps, scriptTokens, type ScenarioResult, type Turn } from './report.js';
import { runScenario } from './scenario.js';

export interface RetryStormOptions {
  progress?: (line: string) => void;
}

export const LOOP_REPEAT_LIMIT = 2;
const MAX_STEPS = 20;
const MAX_TOKENS = 200_000;

const TICKET = {
  id: 'T-004',
  subject: 'Integration check fails: missing subscription record',
  body: 'The billing integration test expects a subscription record for account 7781.',
  customer: { email: 'ops@example.com', name: 'Ops' },
};

/** Read, write, read ("still failing"), then the same write again and again; the context grows 4k -> 61k. */
export function retryStormScript(t = TICKET): Turn[] {
  const turns: Turn[] = [];
  for (let i = 1; i <= MAX_STEPS; i++) {
    const usage = { promptTokens: 4000 + 3000 * (i - 1), completionTokens: 200 };
    if (i === 1 || i === 3) turns.push({ toolCalls: [{ name: 'read_ticket', args: {} }], usage });
    else {
      const body =
        i === 2
          ? 'Create the subscription record for account 7781.'
          : `Attempt ${i}: the check still fails, create the subscription record for account 7781 again.`;
      turns.push({
        toolCalls: [
          {
            name: 'create_ticket',
            args: { subject: 'Create missing subscription record', body, priority: 'high', sourceTicketId: t.id },
          },
        ],
        usage,
      });
    }
  }
  return turns;
}

export async function runRetryStorm(opts: RetryStormOptions = {}): Promise<ScenarioResult> {
  const faults: FaultRule[] = [
    { kind: 'rate_limit', resource: 'tickets', count: 1, retryAfterS: 0 },
    { kind: 'ignore_keys', resource: 'tickets' },
  ];
  const script = retryStormScript();
  const setup = {
    stack: { workers: 1, faults, progress: opts.progress, env: { LOOP_REPEAT_LIMIT: String(LOOP_REPEAT_LIMIT) } },
    run: {
      tenant: 'acme',
      ticket: TICKET,
      budget: { maxSteps: MAX_STEPS, maxTokens: MAX_TOKENS },
      agent: { model: 'scripted', script },
    },
    created: (runId: string) =>
      `run ${runId} created; the agent will ask for the same write up to ${script.filter((x) => x.toolCalls[0]?.name === 'create_ticket').length} times`,
  };
  return runScenario('retry-storm', setup, async ({ stack: s, runId, tl, checks, summary, ended }) => {
    const end = await ended(30_000, 'the run to stop');
    opts.progress?.(`run stopped: ${String(end.data.status)} ${String(end.data.reason ?? '')}`);
    const view = await s.view(runId);

    const counts = s.sandbox.counts();
    const posts = s.tap.records.filter((r) => r.method === 'POST' && r.url.startsWith('/api/v2/tickets'));
    const statuses = posts.map((r) => r.status ?? r.outcome);
    const decisions = view.transcript.filter((e) => e.kind === 'decision') as unknown as {
      step: number;
      attempts?: number;
      toolCalls: { name: string }[];
    }[];
    const writeSteps = decisions.filter((d) => d.toolCalls.some((c) => c.name === 'create_ticket')).map((d) => d.step);
    const observations = view.transcript.filter((e) => e.kind === 'observation') as unknown as {
      step: number;
      tool: string;
      status: string;
      output?: unknown;
    }[];
    const writeObs = observations.filter((o) => o.tool === 'create_ticket');
    const effects = view.effects.filter((e) => e.tool === 'create_ticket');
    const action = effects[0];
    Object.assign(summary, {
      status: view.status,
      reason: view.reason,
      writesRequested: writeSteps.length,
      writes: counts.byResource.tickets.records,
      duplicates: counts.duplicates,
      ticketPosts: posts.length,
      ticketAnswers: statuses,
      answeredFromLedger: writeObs.filter((o) => o.status === 'deduplicated').length,
      loopRepeatLimit: LOOP_REPEAT_LIMIT,
      stoppedAtStep: view.step,
      steps: view.budget.used.steps,
      journalSteps: decisionSteps(view).length,
      tokens: view.budget.used.tokens,
      maxTokens: view.budget.limits.maxTokens,
      tokensIfUnstopped: scriptTokens(script),
    });
    tl.add(
      end.at,
      'scenario',
      `stopped at step ${view.step} of ${MAX_STEPS}: ${view.budget.used.tokens} tokens used; the loop running to step ${MAX_STEPS} would have used ${scriptTokens(script)}`,
    );
    checks.expect(
      view.status === 'needs_human' && view.reason.startsWith('loop_detected'),
      `run stopped needs_human / loop_detected (${view.status} ${view.reason})`,
    );
    checks.expect(
      counts.byResource.tickets.records === 1 && counts.duplicates === 0,
      `exactly one write, no duplicate (${counts.byResource.tickets.records}, ${counts.duplicates})`,
    );
    checks.expect(
      statuses.join(',') === '429,201',
      `the service saw one 429 then one 201, nothing more (${statuses.join(', ')})`,
    );
    checks.expect(
      writeSteps.length === LOOP_REPEAT_LIMIT + 1,
      `the write was asked for ${LOOP_REPEAT_LIMIT + 1} times before the stop (steps ${writeSteps.join(', ')})`,
    );
    checks.expect(
      writeObs.map((o) => o.status).join(',') ===
        ['ok', ...Array(LOOP_REPEAT_LIMIT - 1).fill('deduplicated')].join(','),
      `the model saw ok, then repeats answered from the ledger (${writeObs.map((o) => o.status).join(', ')})`,
    );
    checks.expect(
      decisions.find((d) => d.step === writeSteps[0])?.attempts === 1 &&
        !JSON.stringify(observations).includes('rate_limit'),
      'the 429 was retried in code: never in the model context, no extra model call',
    );
    checks.expect(
      effects.length === 1 && action?.state === 'confirmed' && action.attempts === 1,
      `one ledger action, confirmed, dispatched once (${effects.map((e) => `${e.state} attempts=${e.attempts} repeats=${e.repeats}`).join('; ')})`,
    );
    checks.expect(
      view.budget.used.tokens === scriptTokens(script, writeSteps[writeSteps.length - 1]),
      `tokens charged for the turns played only (${view.budget.used.tokens} of ${scriptTokens(script)} if the loop had run on)`,
    );
    return view;
  });
}
