/**
 * An erasure of a customer whose ended run holds a write that never left: a ticket whose every dispatch met 429 until
 * the run's deadline ended it (`budget_exceeded`, the action `safe_retry`: proven not sent). The erasure (over the
 * real API, the real worker and the sandbox) settles it itself, `rejected` with the erasure as evidence, and goes
 * through (201); nothing reaches the sandbox, then or on an operator's retry of the erased run. An action that may
 * have left (outcome_unknown) still refuses the erasure (409 actions_unsettled), and then nothing is written: the
 * never-sent actions beside it stay as they were. A retry of an erased run whose step would act again on its
 * journalled decision (the step died after planning its write, until the run failed) is refused, 409 `run_erased`:
 * the decision's arguments are the marker, and a write tool that takes any string would send it as another action.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { producerAuth, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { ticketCall } from '../../../testkit/turns.js';
import { defineAgent, defineWriteTool } from '../../../src/index.js';
import { CrashPoints } from '../../../src/config/testHooks.js';
import { actionIdentity } from '../../../src/ledger/identity.js';
import { ledgerFor, type ActionRecord, type HistoryEntry } from '../../../src/ledger/ledger.js';
import { createEffectRunner } from '../../../src/ledger/runner.js';
import type { WriteTool } from '../../../src/core/tool.js';
import type { EngineContext } from '../../../src/runs/engineContext.js';
import { call, final, OPERATOR_TOKEN, operatorHarness, turn } from './support.js';
import { withOwnAgents } from '../../support/ownAgents.js';

type Item = ActionRecord & { history: HistoryEntry[] };

let h: Harness & { url: string };

const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];
let seq = 0;

/** A run of the scripted support agent through POST /v1/runs: its id and subject (the ticket id). */
async function postRun(
  script: unknown[],
  budget: Record<string, number> = {},
): Promise<{ runId: string; subject: string }> {
  const id = `ENS-${++seq}-${Date.now()}`;
  const res = await fetch(`${h.url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `ens-${id}`, ...producerAuth },
    body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket(id), agent: { model: 'scripted', script }, budget }),
  });
  expect(res.status).toBe(201);
  const { runId } = (await res.json()) as { runId: string };
  return { runId, subject: (await h.ctx.store.readSpec(runId))!.key };
}

const actionsOf = (runId: string): Promise<Item[]> => ledgerFor(h.ctx).listForRun(runId);
const rejections = async (tool: string) =>
  (await h.ctx.metrics.effects.get()).values.find((v) => v.labels.tool === tool && v.labels.state === 'rejected')
    ?.value ?? 0;
const queue = async () =>
  (await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations')).body.reconciliations;

describe("an erasure settles an ended run's never-sent write itself", () => {
  beforeAll(async () => {
    h = await operatorHarness('erasure-never-sent');
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(() => h.sandbox.reset());

  it('a ticket left safe_retry by 429s until the deadline: rejected with the erasure as evidence, 201, nothing sent, nor by a retry', async () => {
    h.sandbox.setFaults([{ kind: 'rate_limit', resource: 'tickets' }]);
    const { runId, subject } = await postRun([turn([ticketCall]), final], { maxWallMs: 1500 });
    expect(await h.waitForStatus(runId, ENDED)).toBe('budget_exceeded');
    await h.untilNoJob(runId);
    h.sandbox.clearFaults();
    const [before] = await actionsOf(runId);
    expect(before).toMatchObject({ tool: 'create_ticket', state: 'safe_retry' });
    // Every request met the 429 before anything was processed: no ticket.
    expect(h.sandbox.counts().byResource.tickets.records).toBe(0);
    const requests = h.sandbox.counts().requests;
    const counted = await rejections('create_ticket');

    const res = await call<{ erasureId: string; runIds: string[] }>(h.url, 'POST', '/v1/erasures', {
      tenant: 'acme',
      subject,
    });
    expect(res.status).toBe(201);
    expect(res.body.runIds).toContain(runId);
    const [after] = await actionsOf(runId);
    expect(after!.state).toBe('rejected');
    // The move, with the erasure as evidence and who asked, kept by the rewrite (ids and codes are audit fields).
    expect(after!.history.at(-1)).toMatchObject({
      from: 'safe_retry',
      to: 'rejected',
      by: 'operator',
      evidence: { reason: 'customer_erased', erasureId: res.body.erasureId, status: 'budget_exceeded' },
    });
    expect(JSON.stringify(after!.args)).not.toContain('Broken mug');
    expect(await rejections('create_ticket')).toBe(counted + 1);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'erasedAt')).not.toBeNull();
    // Never a person's item: neither before nor after.
    expect((await queue()).some((x) => x.runId === runId)).toBe(false);
    expect(h.sandbox.counts().requests).toBe(requests);

    // An operator's retry of the erased run: it goes on from its last commit and sends nothing.
    const retry = await call(h.url, 'POST', `/v1/runs/${runId}/retry`, { wallMs: 60_000 });
    expect(retry.status).toBe(200);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'cancelled'])).not.toBe('running');
    await h.untilNoJob(runId);
    expect(h.sandbox.counts().requests).toBe(requests);
    expect(h.sandbox.counts().byResource.tickets.records).toBe(0);
    expect((await actionsOf(runId)).map((a) => [a.actionId, a.state])).toEqual([[before!.actionId, 'rejected']]);
  });

  it('planned and authorized actions of an ended run are rejected too; one outcome_unknown beside them refuses, nothing written', async () => {
    const { runId, subject } = await postRun([final]);
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    await h.untilNoJob(runId);
    // Actions as a step leaves them (planned, authorized) and one that may have left (outcome_unknown).
    const ledger = ledgerFor(h.ctx);
    const tool = { name: 'create_ticket' } as WriteTool;
    const plan = async (subjectLine: string) => {
      const args = { ...ticketCall.args, subject: subjectLine };
      const id = actionIdentity(runId, tool, args);
      await ledger.plan(runId, 1, `c-${subjectLine}`, tool.name, id, args, 'test');
      return id.actionId;
    };
    const by = { by: 'test', why: 'test' };
    const planned = await plan('one');
    const authorized = await plan('two');
    await ledger.transition(runId, authorized, 'planned', 'authorized', by);
    const unknown = await plan('three');
    await ledger.transition(runId, unknown, 'planned', 'authorized', by);
    await ledger.transition(runId, unknown, 'authorized', 'dispatched', by);
    await ledger.transition(runId, unknown, 'dispatched', 'outcome_unknown', by);

    const refused = await call(h.url, 'POST', '/v1/erasures', { tenant: 'acme', subject });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: 'actions_unsettled',
      actions: [{ actionId: unknown, runId, state: 'outcome_unknown' }],
    });
    const states = async () => Object.fromEntries((await actionsOf(runId)).map((a) => [a.actionId, a.state]));
    expect(await states()).toEqual({ [planned]: 'planned', [authorized]: 'authorized', [unknown]: 'outcome_unknown' });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'erasedAt')).toBeNull();

    // Settled (a person found it not sent, on a run nothing resumes: rejected), the erasure goes through.
    await ledger.transition(runId, unknown, 'outcome_unknown', 'safe_retry', by);
    const erased = await call<{ erasureId: string }>(h.url, 'POST', '/v1/erasures', { tenant: 'acme', subject });
    expect(erased.status).toBe(201);
    expect(await states()).toEqual({ [planned]: 'rejected', [authorized]: 'rejected', [unknown]: 'rejected' });
    for (const a of await actionsOf(runId))
      expect(a.history.at(-1)).toMatchObject({ to: 'rejected', evidence: { erasureId: erased.body.erasureId } });
    expect(h.sandbox.counts().requests).toBe(0);
  });
});

/** Every note the `note` tool sent (its service), in order. */
const notesSent: { text: string }[] = [];
const usage = { promptTokens: 10, completionTokens: 5 };

/** A write tool that takes any string: the erasure's marker is valid arguments to it. */
const notes = defineAgent<{ ticket: string; text: string }>({
  name: 'notes',
  version: 'notes@1',
  input: z.object({ ticket: z.string(), text: z.string() }).strict(),
  key: (i) => i.ticket,
  instructions: () => 'Note what the customer asked.',
  tools: [
    defineWriteTool({
      name: 'note',
      description: 'writes a note in the CRM',
      args: z.object({ text: z.string().min(1) }).strict(),
      service: { enforcesKey: true, reconcile: 'none' },
      dispatch: async (a: { text: string }) => {
        notesSent.push(a);
        return { receipt: `n_${notesSent.length}`, output: { ok: true }, replayed: false };
      },
    }),
  ],
});

describe('a retry of an erased run whose step would act on its erased decision again', () => {
  let hn: Harness;
  let ctx: EngineContext;
  let url: string;
  /** The step dies right after planning its write while this is set (each of the job's attempts, until it fails). */
  let dying = true;
  beforeAll(async () => {
    const crash = new CrashPoints(['after_reservation'], () => {
      if (dying) throw new Error('the step dies after its plan');
    });
    const worker = (c: EngineContext) => ({ effects: createEffectRunner(c, { crash }) });
    ({ h: hn, ctx, url } = await withOwnAgents('erasure-never-sent-retry', [notes], { OPERATOR_TOKEN }, worker));
  }, 60_000);
  afterAll(async () => {
    await hn?.close();
  });

  it('is refused 409 run_erased; the planned write, rejected by the erasure, is never sent', async () => {
    const ticket = `ENS-R-${Date.now()}`;
    const res = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `ens-${ticket}`, ...producerAuth },
      body: JSON.stringify({
        tenant: 'acme',
        agent: 'notes',
        input: { ticket, text: 'call Ada back' },
        model: 'scripted',
        script: [
          { toolCalls: [{ name: 'note', args: { text: 'call Ada back' } }], usage },
          { final: 'noted', usage },
        ],
      }),
    });
    expect(res.status).toBe(201);
    const { runId } = (await res.json()) as { runId: string };
    // Every attempt of its step died after the plan: the run failed, its write planned, its decision journalled.
    expect(await hn.waitForStatus(runId, ENDED, 60_000)).toBe('failed');
    await hn.untilNoJob(runId);
    dying = false;
    const ledger = ledgerFor(ctx);
    const [planned] = await ledger.listForRun(runId);
    expect(planned).toMatchObject({ tool: 'note', state: 'planned' });

    const erased = await call(url, 'POST', '/v1/erasures', { tenant: 'acme', subject: ticket });
    expect(erased.status).toBe(201);
    expect((await ledger.get(runId, planned!.actionId))?.state).toBe('rejected');

    const retry = await call(url, 'POST', `/v1/runs/${runId}/retry`, {});
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ error: 'run_erased', runId });
    expect(await ctx.redis.hget(ctx.keys.run(runId).run, 'status')).toBe('failed');
    await hn.untilNoJob(runId);
    expect(notesSent).toEqual([]);
    expect((await ledger.listForRun(runId)).map((a) => [a.actionId, a.state])).toEqual([
      [planned!.actionId, 'rejected'],
    ]);
  }, 90_000);
});
