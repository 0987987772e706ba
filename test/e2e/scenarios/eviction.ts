/**
 * Seed 000: a support agent of up to 20 steps is evicted at step 12, after it
 * has opened a follow-up ticket (step 4) and emailed the customer (step 5).
 *
 * Two worker processes share the queue. Step 12's read (lookup_customer) is
 * held 2.5 s by the service, so the eviction lands inside step 12 for certain:
 * the scenario finds the worker that holds the step (its /metrics: started -
 * committed) while the read is in flight on the wire tap, and sends it a real
 * signal. SIGKILL (default): the process dies with everything in memory; the
 * step's lock expires and the other worker redelivers it (~2 s). SIGTERM
 * (`--signal=SIGTERM`): the worker aborts the read and hands the job back at
 * once. Either way the run resumes at step 12, not step 1: one ticket, one
 * email, and a budget that continues from what was used before the eviction.
 */
import { committers, decisionSteps, scriptTokens, type ScenarioResult, type Turn } from './report.js';
import { runScenario } from './scenario.js';
import { stepsInFlight } from './stack.js';
import { until } from '../../../testkit/until.js';

export interface EvictionOptions {
  signal?: 'SIGKILL' | 'SIGTERM';
  progress?: (line: string) => void;
}

export const EVICT_AT_STEP = 12;
const MAX_STEPS = 20;
const SLOW_READ_MS = 2500;

const TICKET = {
  id: 'T-000',
  subject: 'My order arrived broken',
  body: 'The mug in order 4411 was shattered. I would like a replacement.',
  customer: { email: 'ada@example.com', name: 'Ada' },
};

/** 20 turns: read, search, open a ticket (4), email the customer (5), more reads, look the customer up (12), ..., final (20). */
export function evictionScript(t = TICKET): Turn[] {
  const turns: Turn[] = [];
  for (let i = 1; i <= MAX_STEPS; i++) {
    const usage = { promptTokens: 380 + 70 * i, completionTokens: 40 + (i % 3) * 10 };
    const call = (name: string, args: Record<string, unknown> = {}) =>
      turns.push({ toolCalls: [{ name, args }], usage });
    if (i === 1) call('read_ticket');
    else if (i === 2) call('search_kb', { query: t.subject });
    else if (i === 3) call('search_kb', { query: 'replacement for an item that arrived broken' });
    else if (i === 4)
      call('create_ticket', {
        subject: `Replacement: ${t.subject}`,
        body: `${t.customer.name} received a broken item; ship a replacement.`,
        priority: 'high',
        sourceTicketId: t.id,
      });
    else if (i === 5)
      call('send_email', {
        to: t.customer.email,
        template: 'replacement_on_its_way',
        subject: `Re: ${t.subject}`,
        body: `Hello ${t.customer.name}, a replacement is on its way. Sorry about the mug.`,
      });
    else if (i === EVICT_AT_STEP) call('lookup_customer', { email: t.customer.email });
    else if (i === MAX_STEPS)
      turns.push({ toolCalls: [], final: 'Replacement ticket opened and the customer notified.', usage });
    else if (i % 2 === 0) call('search_kb', { query: `order follow-up ${i}` });
    else call('read_ticket');
  }
  return turns;
}

export async function runEviction(opts: EvictionOptions = {}): Promise<ScenarioResult> {
  const signal = opts.signal ?? 'SIGKILL';
  const script = evictionScript();
  const setup = {
    stack: {
      workers: 2,
      progress: opts.progress,
      faults: [{ kind: 'slow_commit' as const, resource: 'customers', ms: SLOW_READ_MS, count: 1 }],
    },
    summary: { signal },
    run: {
      tenant: 'acme',
      ticket: TICKET,
      budget: { maxSteps: MAX_STEPS, maxTokens: 100_000 },
      agent: { model: 'scripted', script },
    },
    created: (runId: string) => `run ${runId} created; waiting for step ${EVICT_AT_STEP}`,
  };
  return runScenario('eviction', setup, async ({ stack: s, runId, follower: f, tl, checks, summary, ended }) => {
    await f.waitFor(
      (e) => e.type === 'step_committed' && Number(e.data.step) === EVICT_AT_STEP - 1,
      30_000,
      `step ${EVICT_AT_STEP - 1} to commit`,
    );
    // Step 12 is running when its read is on the wire and a worker holds a step.
    const victim = await until(`the worker holding step ${EVICT_AT_STEP}`, 5_000, async () => {
      if (!s.tap.inflight().some((r) => r.url.startsWith('/v1/customers/'))) return undefined;
      for (const w of s.workers) if ((await stepsInFlight(w)) > 0) return w;
      return undefined;
    });
    const before = await s.view(runId);
    tl.add(
      Date.now(),
      'scenario',
      `run at step ${before.step} on worker ${victim.label}; budget used so far: ${before.budget.used.steps} steps, ${before.budget.used.tokens} tokens`,
    );
    summary.budgetBeforeEviction = { steps: before.budget.used.steps, tokens: before.budget.used.tokens };
    checks.expect(before.step === EVICT_AT_STEP, `the eviction lands at step ${EVICT_AT_STEP} (cursor ${before.step})`);
    checks.expect(
      before.budget.used.steps === EVICT_AT_STEP - 1 &&
        before.budget.used.tokens === scriptTokens(script, EVICT_AT_STEP - 1),
      `budget before the eviction = steps 1..${EVICT_AT_STEP - 1} exactly (${before.budget.used.steps} steps, ${before.budget.used.tokens} tokens)`,
    );

    const evictedAt = Date.now();
    s.signal(
      victim,
      signal,
      signal === 'SIGKILL'
        ? `pod evicted mid-step ${EVICT_AT_STEP}: the process dies with whatever it held in memory, nothing handed back`
        : `pod evicted mid-step ${EVICT_AT_STEP}: graceful termination`,
    );
    const exit = await victim.exited;
    tl.add(exit.at, `worker ${victim.label}`, `process exited (${exit.signal ?? `code ${exit.code}`})`);
    checks.expect(
      signal === 'SIGKILL' ? exit.signal === 'SIGKILL' : exit.code === 0,
      `worker ${victim.label} ended by the eviction (${exit.signal ?? `code ${exit.code}`})`,
    );
    summary.evictedWorker = `${victim.label} (pid ${victim.pid})`;
    opts.progress?.(`worker ${victim.label} evicted with ${signal}; waiting for step ${EVICT_AT_STEP} to resume`);

    const resumed = await f.waitFor(
      (e) => e.type === 'step_committed' && Number(e.data.step) === EVICT_AT_STEP,
      30_000,
      `step ${EVICT_AT_STEP} to commit after the eviction`,
    );
    const after = await s.view(runId);
    summary.recoveryMs = resumed.at - evictedAt;
    summary.budgetAfterRecovery = { steps: after.budget.used.steps, tokens: after.budget.used.tokens };
    checks.expect(resumed.at >= evictedAt - 1, `step ${EVICT_AT_STEP} committed only after the eviction`);
    checks.expect(
      after.budget.used.steps >= EVICT_AT_STEP &&
        after.budget.used.tokens === scriptTokens(script, after.budget.used.steps),
      `budget after recovery continues from before: ${after.budget.used.steps} steps, ${after.budget.used.tokens} tokens = exactly the turns played`,
    );

    const end = await ended(30_000);
    opts.progress?.(`run finished: ${String(end.data.status)}`);
    const view = await s.view(runId);
    const resumedBy = committers(s.workers, runId).get(EVICT_AT_STEP);
    summary.resumedBy = resumedBy ?? null;
    tl.add(
      resumed.at,
      'scenario',
      `step ${EVICT_AT_STEP} resumed on worker ${resumedBy ?? '?'} ${resumed.at - evictedAt} ms after the eviction (${signal === 'SIGKILL' ? 'its lock expired and the stalled job was redelivered' : 'the job was handed back at once'}); steps 1-${EVICT_AT_STEP - 1} were not redone`,
    );
    checks.expect(
      resumedBy !== undefined && resumedBy !== victim.label,
      `step ${EVICT_AT_STEP} resumed on another worker (${resumedBy ?? 'unknown'})`,
    );

    const counts = s.sandbox.counts();
    const paths = { tickets: '/api/v2/tickets', emails: '/emails' } as const;
    const posts = (resource: keyof typeof paths) =>
      s.tap.records.filter((r) => r.method === 'POST' && r.url.startsWith(paths[resource])).length;
    const steps = decisionSteps(view);
    Object.assign(summary, {
      status: view.status,
      reason: view.reason,
      steps: view.budget.used.steps,
      journalSteps: steps.length,
      tokens: view.budget.used.tokens,
      tokensScripted: scriptTokens(script),
      maxSteps: view.budget.limits.maxSteps,
      tickets: counts.byResource.tickets.records,
      emails: counts.byResource.emails.records,
      duplicates: counts.duplicates,
      ticketPosts: posts('tickets'),
      emailPosts: posts('emails'),
    });
    checks.expect(view.status === 'completed', `run completed (${view.status} ${view.reason})`);
    checks.expect(counts.byResource.tickets.records === 1, `one ticket (${counts.byResource.tickets.records})`);
    checks.expect(counts.byResource.emails.records === 1, `one email (${counts.byResource.emails.records})`);
    checks.expect(counts.duplicates === 0, `no duplicate effect (${counts.duplicates})`);
    checks.expect(
      posts('tickets') === 1 && posts('emails') === 1,
      `ticket and email each requested once from the service (${posts('tickets')}, ${posts('emails')})`,
    );
    checks.expect(
      steps.join(',') === Array.from({ length: MAX_STEPS }, (_, i) => i + 1).join(','),
      `journal holds steps 1..${MAX_STEPS} once each, in order (${steps.join(',')})`,
    );
    checks.expect(
      view.budget.used.steps === MAX_STEPS && view.budget.used.tokens === scriptTokens(script),
      `final budget = ${MAX_STEPS} steps and the script's ${scriptTokens(script)} tokens: no reset, no double charge (${view.budget.used.steps}, ${view.budget.used.tokens})`,
    );
    return view;
  });
}
