/**
 * A cancel recorded while a write's outcome is unknown sends nothing more for the model. A real worker process is
 * SIGKILLed after the ledger's `dispatched` and before its request left (crash point after_dispatched); the run is
 * cancelled through the API (202, at its next commit); then the next owner, a healthy worker's step or the
 * reconciler's sweep, finds the action with no live owner. A same-key replay would be the first request the service
 * ever sees, an effect made after the cancel: instead a lookup may settle the action (found -> confirmed), else it goes
 * to a person (needs_human, in the human queue, its history saying the run was cancelled while its outcome was
 * unknown), and the run ends `cancelled`. The sandbox's Resend and Stripe count the records made.
 */
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { final, turn, emailCall, refundCall, ticketCall } from '../../testkit/turns.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { call, OPERATOR_TOKEN } from './operators/support.js';
import { scriptedRun, spawnVictim } from '../support/crashVictim.js';
import { captureLines } from '../support/logCapture.js';

let h: Harness;
let url: string;
let ledger: Ledger;
beforeEach(async () => {
  h = await createHarness('cancel-unknown', {
    OPERATOR_TOKEN,
    RECONCILE_DEADLINE_MS: '2000',
    RECONCILE_POLL_MS: '50',
    RECONCILER_MIN_AGE_MS: '0',
  });
  url = (await h.startApi()).url;
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterEach(async () => h.close());

let seq = 0;
const createRun = (script: Script) => scriptedRun(h, `CUO-${++seq}-${Date.now()}`, script);

/**
 * The run's one write left by a worker process SIGKILLed at `crashPoint`, then the run cancelled through the API: the
 * action, and the sandbox's records of `resource` at the cancel.
 */
async function crashThenCancel(
  call0: { name: string; args: Record<string, unknown> },
  crashPoint: 'after_dispatched' | 'after_call',
  resource: 'emails' | 'refunds' | 'tickets',
): Promise<{ runId: string; actionId: string; recordsAtCancel: number }> {
  const runId = await createRun([turn([call0]), final]);
  const victim = await spawnVictim(h, `${crashPoint}@1`);
  await until('the intent recorded', 20_000, async () =>
    (await ledger.listForRun(runId)).some((a) => a.state === 'dispatched'),
  );
  await until(
    'the victim dead',
    10_000,
    async () => victim.child.exitCode !== null || victim.child.signalCode !== null,
  );
  expect(victim.child.signalCode).toBe('SIGKILL');
  const recordsAtCancel = h.sandbox.counts().byResource[resource].records;
  const cancel = await call(url, 'POST', `/v1/runs/${runId}/cancel`, {});
  expect(cancel.status).toBe(202);
  expect(cancel.body).toMatchObject({ status: 'running', cancelled: 'at_next_commit' });
  const [action] = await ledger.listForRun(runId);
  expect(action?.state).toBe('dispatched');
  return { runId, actionId: action!.actionId, recordsAtCancel };
}

/** The run ended `cancelled` with the operator's reason, its action with a person and in the human queue. */
async function expectCancelledWithPerson(runId: string, actionId: string): Promise<void> {
  expect(await h.waitForStatus(runId, ['cancelled', 'completed', 'failed', 'needs_human'])).toBe('cancelled');
  expect((await h.ctx.store.readState(runId))?.reason).toBe('cancelled_by_operator: requested by operator');
  const action = (await ledger.get(runId, actionId))!;
  expect(action.state).toBe('needs_human');
  const history = await ledger.history(runId, actionId);
  expect(history.map((e) => `${e.from}->${e.to}`)).toEqual([
    'null->planned',
    'planned->authorized',
    'authorized->dispatched',
    'dispatched->outcome_unknown',
    'outcome_unknown->needs_human',
  ]);
  const toPerson = history.at(-1)!;
  expect(toPerson.why).toMatch(
    /^the run was cancelled while the action's outcome was unknown \(cancelled_by_operator: requested by operator\): no same-key replay after a cancel, a person decides; /,
  );
  expect(toPerson.evidence).toMatchObject({ cancel: 'cancelled_by_operator: requested by operator' });
  const queue = await call<{ reconciliations: { actionId: string; state: string }[] }>(
    url,
    'GET',
    '/v1/reconciliations',
  );
  expect(queue.body.reconciliations).toContainEqual(expect.objectContaining({ actionId, state: 'needs_human' }));
}

describe('a cancel while a write of the model is unknown: no same-key replay', () => {
  for (const [name, c, resource] of [
    ['send_email', emailCall, 'emails'],
    ['refund', refundCall(1000), 'refunds'],
  ] as const) {
    it(`${name}: the next owner's step sends nothing after the cancel; the action goes to a person`, async () => {
      const { runId, actionId, recordsAtCancel } = await crashThenCancel(c, 'after_dispatched', resource);
      expect(recordsAtCancel).toBe(0);
      const { lines, stream } = captureLines();
      await h.startWorker({ effects: createEffectRunner({ ...h.ctx, log: pino(stream) }) });
      await expectCancelledWithPerson(runId, actionId);
      expect(h.sandbox.counts().byResource[resource].records).toBe(0);
      expect(h.sandbox.counts().byResource[resource].byKey).toEqual({});
      expect(lines().filter((l) => l.code === 'replay_cancelled')).toEqual([
        expect.objectContaining({ runId, actionId, cancel: 'cancelled_by_operator: requested by operator' }),
      ]);
      expect((await h.ctx.metrics.replaysCancelled.get()).values).toEqual([
        expect.objectContaining({ labels: { tool: name }, value: 1 }),
      ]);
    }, 60_000);
  }

  it("the reconciler's sweep sends nothing for a cancelled run either; the action goes to a person", async () => {
    const { runId, actionId } = await crashThenCancel(emailCall, 'after_dispatched', 'emails');
    const rec = (await ledger.get(runId, actionId))!;
    // The victim's job lock lapses: the action has no live owner, and the sweep takes it before any step does.
    await until('no live owner', 10_000, async () => !(await ledger.ownerAlive(rec)));
    const { lines, stream } = captureLines();
    const report = await new Reconciler({ ...h.ctx, log: pino(stream) }, 'reconciler:cancel-unknown').sweep();
    expect(report.outcomes).toMatchObject({ needs_human: 1 });
    expect((await ledger.get(runId, actionId))?.state).toBe('needs_human');
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
    expect(lines().filter((l) => l.code === 'replay_cancelled')).toEqual([
      expect.objectContaining({ runId, actionId, cancel: 'cancelled_by_operator: requested by operator' }),
    ]);
    // The run's step, redelivered to a healthy worker, finds the action with a person and ends the run cancelled.
    await h.startWorker();
    await expectCancelledWithPerson(runId, actionId);
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
  }, 60_000);

  it('a lookup still settles an action whose request did leave before the cancel: confirmed, nothing re-sent', async () => {
    // The ticket was created (crash after the call, before its answer was recorded): Zendesk's lookup finds it.
    const { runId, actionId, recordsAtCancel } = await crashThenCancel(ticketCall, 'after_call', 'tickets');
    expect(recordsAtCancel).toBe(1);
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['cancelled', 'completed', 'failed', 'needs_human'])).toBe('cancelled');
    const action = (await ledger.get(runId, actionId))!;
    expect(action.state).toBe('confirmed');
    expect((await ledger.history(runId, actionId)).at(-1)?.why).toBe(
      'the service has the request: receipt recovered by lookup',
    );
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
    expect(h.sandbox.counts().byResource.tickets.byKey).toEqual({ [action.idempotencyKey]: 1 });
    expect((await h.ctx.metrics.replaysCancelled.get()).values).toEqual([]);
  }, 60_000);
});
