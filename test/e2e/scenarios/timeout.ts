/**
 * Seed 003: the email send times out, but the service had (or will have)
 * committed it. The ledger must not resend blindly: dispatched ->
 * outcome_unknown -> ask the service by idempotency key -> confirmed with the
 * receipt found by the lookup. One email.
 *
 * `slow_commit` (default): the email service takes longer than the tool's
 * timeout (send_email: 5 s) and commits after the worker gave up; lookups say
 * `processing` until then, and the ledger waits and asks again.
 * `lost_response`: the service commits and the answer is lost on the way back.
 */
import { createSupportTools } from '../../../src/agents/support/tools/index.js';
import type { FaultRule } from '../../../sandbox/types.js';
import { decisionSteps, scriptTokens, type ScenarioResult } from './report.js';
import { runScenario } from './scenario.js';
import type { Timeline } from './timeline.js';

export interface TimeoutOptions {
  fault?: 'slow_commit' | 'lost_response';
  progress?: (line: string) => void;
}

const TICKET = {
  id: 'T-003',
  subject: 'Where is my refund?',
  body: 'I returned the lamp two weeks ago and have heard nothing.',
  customer: { email: 'grace@example.com', name: 'Grace' },
};

export function timeoutScript(t = TICKET) {
  const usage = (p: number, c: number) => ({ promptTokens: p, completionTokens: c });
  return [
    { toolCalls: [{ name: 'read_ticket', args: {} }], usage: usage(420, 40) },
    {
      toolCalls: [
        {
          name: 'send_email',
          args: {
            to: t.customer.email,
            template: 'refund_status',
            subject: `Re: ${t.subject}`,
            body: `Hello ${t.customer.name}, your refund was issued today; it reaches your card within 5 days.`,
          },
        },
      ],
      usage: usage(610, 90),
    },
    { toolCalls: [], final: 'Customer told the refund was issued.', usage: usage(760, 30) },
  ];
}

/** The send_email tool's own timeout (the tool is built only to read it: no request is sent). */
const SEND_TIMEOUT_MS = createSupportTools({ baseUrl: 'http://127.0.0.1:9' }).find(
  (t) => t.name === 'send_email',
)!.timeoutMs;
const EXPECTED_PATH = ['planned', 'authorized', 'dispatched', 'outcome_unknown', 'confirmed'];

export async function runTimeout(opts: TimeoutOptions = {}): Promise<ScenarioResult> {
  const fault = opts.fault ?? 'slow_commit';
  const commitMs = SEND_TIMEOUT_MS + 1500;
  const faults: FaultRule[] =
    fault === 'slow_commit'
      ? [{ kind: 'slow_commit', resource: 'emails', ms: commitMs, count: 1 }]
      : [{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }];
  const script = timeoutScript();
  const setup = {
    stack: { workers: 1, faults, progress: opts.progress, env: { RECONCILE_POLL_MS: '400' } },
    summary: { fault },
    beforeRun: (tl: Timeline) => {
      if (fault === 'slow_commit')
        tl.add(
          Date.now(),
          'scenario',
          `the email service will commit after ${commitMs} ms; send_email gives up after ${SEND_TIMEOUT_MS} ms`,
        );
    },
    run: { tenant: 'acme', ticket: TICKET, budget: { maxSteps: 10 }, agent: { model: 'scripted', script } },
    created: (runId: string) =>
      `run ${runId} created; the email send will ${fault === 'slow_commit' ? `time out after ${SEND_TIMEOUT_MS} ms` : 'lose its answer'}`,
  };
  return runScenario('timeout', setup, async ({ stack: s, runId, checks, summary, ended }) => {
    const end = await ended(45_000);
    opts.progress?.(`run finished: ${String(end.data.status)}`);
    const view = await s.view(runId);

    const counts = s.sandbox.counts();
    // In the order they were sent (the tap records a request when it ends: the first send ends last).
    const emailPosts = s.tap.records
      .filter((r) => r.method === 'POST' && r.url === '/emails')
      .sort((a, b) => a.start - b.start);
    // Resend has no lookup: every POST after the first is the ledger's same-key replay.
    const replays = emailPosts.slice(1);
    const answers = replays.map((r) => (r.outcome === 'answered' ? (r.status ?? 0) : r.outcome));
    const email = view.effects.find((e) => e.tool === 'send_email');
    const path = email?.history.map((h) => h.to) ?? [];
    const unknown = email?.history.find((h) => h.to === 'outcome_unknown');
    const confirmed = email?.history.find((h) => h.to === 'confirmed');
    const evidence = (confirmed?.evidence ?? {}) as { replay?: unknown; receipt?: unknown };
    const lastReplayId = (replays.at(-1)?.body as { id?: unknown } | undefined)?.id;
    Object.assign(summary, {
      status: view.status,
      reason: view.reason,
      path: path.join(' -> '),
      emails: counts.byResource.emails.records,
      duplicates: counts.duplicates,
      emailPosts: emailPosts.length,
      replays: replays.length,
      replayAnswers: answers,
      receipt: email?.receipt ?? null,
      confirmedBy: confirmed?.why ?? null,
      evidence: confirmed?.evidence ?? null,
      unknownForMs: unknown && confirmed ? confirmed.at - unknown.at : null,
      steps: view.budget.used.steps,
      journalSteps: decisionSteps(view).length,
      tokens: view.budget.used.tokens,
      tokensScripted: scriptTokens(script),
    });
    checks.expect(view.status === 'completed', `run completed (${view.status} ${view.reason})`);
    checks.expect(
      path.join(',') === EXPECTED_PATH.join(','),
      `email ledger path ${EXPECTED_PATH.join(' -> ')} (${path.join(' -> ')})`,
    );
    checks.expect(
      emailPosts.length >= 2 && emailPosts[0]!.outcome !== 'answered',
      `the email was POSTed, its answer never arrived, and the ledger replayed it with the same key (${emailPosts.map((r) => r.outcome).join(', ')})`,
    );
    checks.expect(
      new Set(emailPosts.map((r) => r.idempotencyKey ?? '')).size === 1 && emailPosts[0]!.idempotencyKey !== undefined,
      'every POST carried the one idempotency key',
    );
    if (fault === 'slow_commit') {
      checks.expect(
        (unknown?.evidence as { reason?: unknown } | undefined)?.reason === 'timeout_or_reset',
        `outcome_unknown after the client timeout (${JSON.stringify(unknown?.evidence ?? null)})`,
      );
      checks.expect(
        answers.includes(409),
        `a replay found the first send still in progress (409 concurrent_idempotent_requests), and the ledger waited (${answers.join(', ')})`,
      );
    }
    checks.expect(
      answers[answers.length - 1] === 200 && lastReplayId === email?.receipt,
      `the last replay answered the original email id (${answers.join(', ')})`,
    );
    checks.expect(
      evidence.replay === true && evidence.receipt === email?.receipt && /replay/.test(confirmed?.why ?? ''),
      `confirmed by the same-key replay, with the service's id as evidence (${JSON.stringify(confirmed?.evidence ?? null)})`,
    );
    checks.expect(
      counts.byResource.emails.records === 1 && counts.duplicates === 0,
      `one email, no duplicate (${counts.byResource.emails.records}, ${counts.duplicates})`,
    );
    checks.expect(
      view.budget.used.tokens === scriptTokens(script),
      `tokens charged once per turn (${view.budget.used.tokens} = ${scriptTokens(script)})`,
    );
    return view;
  });
}
