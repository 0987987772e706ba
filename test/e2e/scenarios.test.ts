/**
 * The three source stories, run exactly as `npm run scenario -- <name>` runs
 * them (same functions, same options): each starts its own redis-server,
 * sandbox, API and worker processes and stops them at the end. The counts
 * come from the sandbox (what the service really committed), the API's run
 * view (journal, budget, ledger history) and the wire tap (what was sent).
 */
import { describe, expect, it } from 'vitest';
import { SCENARIOS, type ScenarioResult } from './scenarios/index.js';
import { evictionScript, EVICT_AT_STEP } from './scenarios/eviction.js';
import { decisionSteps, scriptTokens } from './scenarios/report.js';

const run = (name: string, args: Record<string, string> = {}): Promise<ScenarioResult> =>
  SCENARIOS[name]!.run(new Map(Object.entries(args)));

/** Fails with the timeline, so a broken expectation shows what happened. */
function expectOk(r: ScenarioResult): void {
  expect(r.failures, r.timeline.join('\n')).toEqual([]);
  expect(r.ok).toBe(true);
  expect(JSON.stringify(r.summary)).not.toContain('\n');
}

const STEPS_1_TO_20 = Array.from({ length: 20 }, (_, i) => i + 1);

describe('scenarios (npm run scenario)', () => {
  it('eviction: SIGKILL mid-step 12 after a ticket and an email; another worker ends it, one of each', async () => {
    const r = await run('eviction');
    expectOk(r);
    const s = r.summary;
    const script = evictionScript();
    expect(s).toMatchObject({
      signal: 'SIGKILL',
      status: 'completed',
      tickets: 1,
      emails: 1,
      duplicates: 0,
      ticketPosts: 1,
      emailPosts: 1,
      steps: 20,
      journalSteps: 20,
    });
    // Journal: every step once, in order (steps 1-11 were not redone, step 12 not twice).
    expect(decisionSteps(r.view!)).toEqual(STEPS_1_TO_20);
    // Budget: before the eviction exactly steps 1..11; after it, it continues from there; at the end exactly the 20 turns.
    expect(s.budgetBeforeEviction).toEqual({
      steps: EVICT_AT_STEP - 1,
      tokens: scriptTokens(script, EVICT_AT_STEP - 1),
    });
    const after = s.budgetAfterRecovery as { steps: number; tokens: number };
    expect(after.steps).toBeGreaterThanOrEqual(EVICT_AT_STEP);
    expect(after.tokens).toBe(scriptTokens(script, after.steps));
    expect(s.tokens).toBe(scriptTokens(script));
    expect(r.view!.budget.used).toMatchObject({ steps: 20, tokens: scriptTokens(script) });
    // A real SIGKILL to a real process, and the step resumed elsewhere.
    expect(String(s.evictedWorker)).not.toContain(String(s.resumedBy));
    expect(r.timeline.some((l) => /SIGKILL -> worker/.test(l))).toBe(true);
    expect(r.timeline.some((l) => /process exited \(SIGKILL\)/.test(l))).toBe(true);
  }, 90_000);

  it('eviction with SIGTERM: the step is handed back at once, same counts', async () => {
    const r = await run('eviction', { signal: 'SIGTERM' });
    expectOk(r);
    expect(r.summary).toMatchObject({
      signal: 'SIGTERM',
      status: 'completed',
      tickets: 1,
      emails: 1,
      duplicates: 0,
      steps: 20,
      journalSteps: 20,
    });
    expect(decisionSteps(r.view!)).toEqual(STEPS_1_TO_20);
    expect(r.summary.tokens).toBe(scriptTokens(evictionScript()));
    expect(r.timeline.some((l) => /handed back to the queue/.test(l))).toBe(true);
  }, 90_000);

  it('timeout: the send times out, the service commits later; a same-key replay settles it, one email', async () => {
    const r = await run('timeout');
    expectOk(r);
    expect(r.summary).toMatchObject({ fault: 'slow_commit', status: 'completed', emails: 1, duplicates: 0 });
    const email = r.view!.effects.find((e) => e.tool === 'send_email')!;
    expect(email.state).toBe('confirmed');
    expect(email.history.map((h) => h.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'confirmed',
    ]);
    const confirmed = email.history[email.history.length - 1]!;
    expect(confirmed.from).toBe('outcome_unknown');
    expect(confirmed.why).toMatch(/replay/);
    expect(confirmed.evidence).toMatchObject({ replay: true, receipt: email.receipt });
    // The ledger waited while Resend said "still in progress" (409), then its replay answered the original id.
    const answers = r.summary.replayAnswers as (number | string)[];
    expect(answers).toContain(409);
    expect(answers[answers.length - 1]).toBe(200);
  }, 90_000);

  it('timeout with the answer lost after the commit: one same-key replay confirms it, one email', async () => {
    const r = await run('timeout', { fault: 'lost_response' });
    expectOk(r);
    expect(r.summary).toMatchObject({
      fault: 'lost_response',
      status: 'completed',
      emails: 1,
      duplicates: 0,
      emailPosts: 2,
      replayAnswers: [200],
    });
    expect(r.summary.path).toBe('planned -> authorized -> dispatched -> outcome_unknown -> confirmed');
  }, 90_000);

  it('retry-storm: 429 then 201 and a looping agent; exactly one write, run stopped loop_detected', async () => {
    const r = await run('retry-storm');
    expectOk(r);
    expect(r.summary).toMatchObject({
      status: 'needs_human',
      writes: 1,
      duplicates: 0,
      ticketPosts: 2,
      ticketAnswers: [429, 201],
      writesRequested: 3,
      answeredFromLedger: 1,
    });
    expect(String(r.summary.reason)).toMatch(/^loop_detected/);
    const effects = r.view!.effects.filter((e) => e.tool === 'create_ticket');
    expect(effects).toHaveLength(1);
    expect(effects[0]).toMatchObject({ state: 'confirmed', attempts: 1 });
    expect(Number(r.summary.tokens)).toBeLessThan(Number(r.summary.tokensIfUnstopped));
  }, 90_000);
});
