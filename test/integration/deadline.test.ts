/**
 * The run's wall-clock deadline bounds everything a step waits for: model
 * retries and their backoff, tool calls, write dispatches and the reconcile
 * polling after them. The margins asserted are generous (a loaded machine);
 * without the bound each of these runs seconds to tens of seconds past it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { withRetry } from '../../src/core/withRetry.js';
import { RetryableError } from '../../src/core/errors.js';
import { DeadlineError } from '../../src/core/timeout.js';
import { ledgerFor } from '../../src/ledger/ledger.js';

/** How late after the deadline a stop may be observed here: the documented margin plus slack for a loaded machine. */
const SLACK_MS = 2500;

let h: Harness;
beforeAll(async () => {
  // Backoffs of seconds and 10 model attempts: unbounded, a step with 9 transient failures waits ~15 s.
  h = await createHarness('deadline', {
    RETRY_BASE_MS: '2000',
    RETRY_MAX_MS: '4000',
    MODEL_MAX_ATTEMPTS: '10',
    RECONCILE_POLL_MS: '100',
    LIMIT_MAX_WALL_MS: String(28 * 24 * 3600_000),
  });
  await h.startWorker();
});
afterAll(async () => {
  h.sandbox.clearFaults();
  await h.close();
});

async function create(ticketId: string, script: Script, maxWallMs: number) {
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(ticketId), budget: { maxWallMs }, agent: { model: 'scripted', script } },
    Date.now(),
  );
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  return spec;
}

const usage = { promptTokens: 10, completionTokens: 5 };
const final = { toolCalls: [], final: 'done', usage, transientFailures: 0 };

describe('withRetry and a deadline', () => {
  it('never sleeps a backoff that would end past the deadline: DeadlineError carrying the last failure', async () => {
    let t = 1000;
    const slept: number[] = [];
    const failure = new RetryableError('503');
    const p = withRetry(
      { maxAttempts: 10, baseMs: 100, maxMs: 100 },
      async () => {
        throw failure;
      },
      {
        random: () => 1,
        now: () => t,
        deadlineAt: 1350,
        sleep: async (ms) => {
          slept.push(ms);
          t += ms;
        },
      },
    );
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineError);
    expect((err as DeadlineError).cause).toBe(failure);
    expect(slept).toEqual([100, 100, 100]);
    expect(t).toBeLessThan(1350);
  });
});

describe('the wall-clock deadline bounds a step', () => {
  it('a deadline further away than a Node timer can hold (28 days) does not stop the run', async () => {
    const read = { toolCalls: [{ name: 'read_ticket', args: {} }], usage, transientFailures: 1 };
    const spec = await create('D-far', [read, final], 28 * 24 * 3600_000);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
  });

  it('model retries and their backoff stop at the deadline: budget_exceeded (wall_clock), failed attempts charged', async () => {
    const script: Script = [
      {
        toolCalls: [{ name: 'read_ticket', args: {} }],
        usage,
        transientFailures: 9,
        failureUsage: { promptTokens: 5, completionTokens: 0 },
      },
      final,
    ];
    const spec = await create('D-model', script, 1500);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded'])).toBe('budget_exceeded');
    expect(Date.now()).toBeLessThan(spec.limits.deadlineAt + SLACK_MS);
    const state = (await h.ctx.store.readState(spec.runId))!;
    expect(state.reason).toMatch(
      /^wall_clock: (a retry would wait past the deadline|deadline) \S+ (passed )?\(\d+ ms of 1500 used\)/,
    );
    expect(state.used.tokens).toBeGreaterThanOrEqual(5);
    expect(state.used.tokens % 5).toBe(0);
    expect(state.used.steps).toBe(0);
  });

  it('a read that never answers is cut at the deadline, and the tools after it do not start', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 10_000 }]);
    const kb = (q: string) => ({ name: 'search_kb', args: { query: q } });
    const script: Script = [{ toolCalls: [kb('a'), kb('b'), kb('c')], usage, transientFailures: 0 }, final];
    const spec = await create('D-read', script, 1000);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded'])).toBe('budget_exceeded');
    // Unbounded: three 3 s tool timeouts, 9 s.
    expect(Date.now()).toBeLessThan(spec.limits.deadlineAt + SLACK_MS);
    const state = (await h.ctx.store.readState(spec.runId))!;
    expect(state.reason).toMatch(/^wall_clock: deadline \S+ passed \(\d+ ms of 1000 used\)/);
    const transcript = await h.ctx.store.transcript(spec.runId);
    expect(transcript.filter((e) => e.kind === 'decision')).toHaveLength(1);
    expect(transcript.filter((e) => e.kind === 'observation')).toHaveLength(0);
    expect(state.used.tokens).toBe(15);
  });

  it('a write dispatched near the deadline and its reconcile polling end by the deadline plus the margin; the ledger keeps the doubt', async () => {
    // The email service commits only after 12 s: the request times out, lookups say `processing`.
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 12_000 }]);
    const email = {
      name: 'send_email',
      args: { to: 'ada@example.com', template: 'ack', subject: 'Re', body: 'On it.' },
    };
    const spec = await create('D-write', [{ toolCalls: [email], usage, transientFailures: 0 }, final], 2000);
    // Unbounded: a 5 s dispatch timeout then 30 s of polling (RECONCILE_DEADLINE_MS).
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'], 20_000)).toBe(
      'needs_human',
    );
    // The last lookup, started before the deadline plus margin, is given RECONCILE_MIN_ATTEMPT_MS at most past it.
    expect(Date.now()).toBeLessThan(
      spec.limits.deadlineAt + h.cfg.DEADLINE_MARGIN_MS + h.cfg.RECONCILE_MIN_ATTEMPT_MS + SLACK_MS,
    );
    const [rec] = await ledgerFor(h.ctx).listForRun(spec.runId);
    expect(rec?.state).toBe('needs_human');
    const history = rec!.history;
    expect(history.map((e) => e.to)).toEqual(expect.arrayContaining(['dispatched', 'outcome_unknown', 'needs_human']));
    expect(history.at(-1)?.why).toMatch(/undecidable at the run's deadline/);
    // What the person reads is the service's answer (processing), not a timeout of what the deadline left.
    expect(JSON.stringify(history.at(-1)?.evidence)).not.toMatch(/timed out after \d{1,3} ms/);
  });
});
