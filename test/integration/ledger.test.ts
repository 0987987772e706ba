/**
 * The effect ledger against the real sandbox over HTTP and real Redis:
 * a 429 then success is one write, the reconciliation of a lost response, races, loops.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness, supportTool } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { CrashPoints } from '../../src/config/testHooks.js';
import type { WriteTool } from '../../src/core/tool.js';
import { defineWriteTool } from '../../src/core/agent.js';
import { z } from 'zod';
import type { Script } from '../../src/models/scriptedTurns.js';
import type { FaultRule } from '../../sandbox/types.js';
import { emailCall as email, final, ticketCall, turn } from '../../testkit/turns.js';

const t = turn;

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('ledger', { RECONCILE_DEADLINE_MS: '1500', RECONCILE_POLL_MS: '50' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

let seq = 0;
async function run(script: Script, faults: FaultRule[] = []): Promise<string> {
  h.sandbox.setFaults(faults);
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(`L-${++seq}`), agent: { model: 'scripted', script } },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

const emailsSent = () => h.sandbox.counts().byResource.emails.records;

describe('effect ledger', () => {
  it('a 429 followed by a 201 produces exactly one recorded write', async () => {
    const runId = await run([t([email]), final], [{ kind: 'rate_limit', resource: 'emails', count: 1 }]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(emailsSent()).toBe(1);
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.state).toBe('confirmed');
    expect(effect?.attempts).toBe(1);
    expect(h.sandbox.counts().byResource.emails.byKey[effect!.idempotencyKey]).toBe(1);
  });

  it('a key-ignoring service still gets one write per action through the ledger, across a redelivery', async () => {
    // The step dies after recording the outcome and before its commit; the redelivered step must not resend.
    let armed = true;
    const crash = new CrashPoints(['after_outcome'], () => {
      if (armed) {
        armed = false;
        throw new Error('simulated crash after the outcome');
      }
    });
    const hk = await createHarness('ledgerkeys');
    try {
      await hk.startWorker({ crash, effects: createEffectRunner(hk.ctx, { crash }) });
      hk.sandbox.setFaults([{ kind: 'ignore_keys' }]);
      const spec = buildSpec(
        hk.ctx,
        { tenant: 'acme', ticket: sampleTicket('K-1'), agent: { model: 'scripted', script: [t([email]), final] } },
        Date.now(),
      );
      await hk.ctx.store.create(spec, Date.now());
      expect(await hk.waitForStatus(spec.runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
      expect(armed).toBe(false);
      expect(hk.sandbox.counts().byResource.emails.records).toBe(1);
      expect(hk.sandbox.counts().duplicates).toBe(0);
    } finally {
      await hk.close();
    }
  });

  it('a send that timed out but did commit is settled by the same-key replay (Resend), no second send', async () => {
    const runId = await run(
      [t([email]), final],
      [{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }],
    );
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(emailsSent()).toBe(1);
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.history.map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'confirmed',
    ]);
    expect(effect?.history.at(-1)?.why).toMatch(/replay/);
    expect(effect?.receipt).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a ticket create that timed out but did commit is found by external_id (Zendesk), no second ticket', async () => {
    const runId = await run(
      [t([ticketCall]), final],
      [{ kind: 'lost_response_after_commit', resource: 'tickets', count: 1 }],
    );
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.history.at(-1)?.why).toMatch(/lookup/);
    expect(effect?.receipt).toMatch(/^\d+$/);
  });

  it('one that never committed is sent once more with the same key (the replay is the retry)', async () => {
    const runId = await run([t([email]), final], [{ kind: 'refuse_before_commit', resource: 'emails', count: 1 }]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(emailsSent()).toBe(1);
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.history.map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'confirmed',
    ]);
    expect(effect?.history.at(-1)?.evidence).toMatchObject({ replay: true });
    expect(Object.keys(h.sandbox.counts().byResource.emails.byKey)).toEqual([effect!.idempotencyKey]);
  });

  it('a lost response the service cannot answer for goes to needs_human, and the run parks', async () => {
    const runId = await run(
      [t([email]), final],
      [
        { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
        { kind: 'no_lookup', resource: 'emails' },
      ],
    );
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('needs_human');
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.state).toBe('needs_human');
    const humanQueue = await h.ctx.redis.zrange(h.ctx.keys.humanQueue(h.ctx.keys.shardOf(runId)), 0, -1);
    expect(humanQueue).toContain(effect!.actionId);
    expect(emailsSent()).toBe(1);
  });

  it('a malformed service response is outcome_unknown, not a success', async () => {
    const runId = await run([t([email]), final], [{ kind: 'malformed_response', resource: 'emails', count: 1 }]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.history.map((x) => x.to)).toContain('outcome_unknown');
    expect(effect?.history.at(-1)?.why).toMatch(/replay/);
    expect(emailsSent()).toBe(1);
  });

  it('a tool call with invalid arguments never reaches the service', async () => {
    const before = h.sandbox.counts().requests;
    const runId = await run([
      t([{ name: 'send_email', args: { to: 'nobody', template: 'x', subject: 's', body: 'b' } }]),
      final,
    ]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(h.sandbox.counts().requests - before).toBe(0);
    expect(await ledger.listForRun(runId)).toHaveLength(0);
  });

  it('the same write requested again in a run is answered from the ledger, then stops the run as loop_detected', async () => {
    const runId = await run([t([email]), t([email]), t([email]), t([email]), final]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^loop_detected: send_email/);
    expect(emailsSent()).toBe(1);
    const obs = (await h.ctx.store.transcript(runId))
      .filter((e) => e.kind === 'observation')
      .map((e) => e.kind === 'observation' && e.status);
    // LOOP_REPEAT_LIMIT=2: the first repeat is answered from the ledger, the second stops the run.
    expect(obs).toEqual(['ok', 'deduplicated']);
    expect(h.ctx.metrics.loopStops).toBeDefined();
  });

  it('one recipient in two spellings (Carol@Example.com, carol@example.com) is one business action: one email', async () => {
    const to = (addr: string) => ({ ...email, args: { ...email.args, to: addr } });
    const runId = await run([t([to('Carol@Example.com')]), t([to('carol@example.com')]), final]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    expect(emailsSent()).toBe(1);
    expect((await ledger.listForRun(runId)).filter((e) => e.tool === 'send_email')).toHaveLength(1);
  });

  it('two workers racing on one action: one dispatch', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 300 }]);
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('RACE'), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const a = createEffectRunner(h.ctx, { workerId: 'w-a' });
    const b = createEffectRunner(h.ctx, { workerId: 'w-b' });
    const sendEmail = supportTool(h.ctx, 'send_email') as WriteTool;
    const ctx = { runId: spec.runId, step: 1, signal: new AbortController().signal, input: spec.input };
    const input = { tool: sendEmail, args: email.args, call: { id: 'call_1_0' }, ctx, tenant: 'acme' };
    const [ra, rb] = await Promise.all([a.run(input), b.run(input)]);
    expect(ra.kind === 'observed' && rb.kind === 'observed').toBe(true);
    expect(emailsSent()).toBe(1);
    const rec = await ledger.get(spec.runId, actionIdentity(spec.runId, sendEmail, email.args).actionId);
    expect(rec?.attempts).toBe(1);
    expect(rec?.state).toBe('confirmed');
  });

  it('the run view lists effects with state, key, receipt and history', async () => {
    const runId = await run([t([ticketCall]), t([email]), final]);
    expect(await h.waitForStatus(runId, ['completed', 'needs_human', 'failed'])).toBe('completed');
    const api = await h.startApi();
    const view = (await (await fetch(`${api.url}/v1/runs/${runId}`, { headers: producerAuth })).json()) as {
      effects: { tool: string; state: string; idempotencyKey: string; receipt: string; history: unknown[] }[];
    };
    expect(view.effects.map((e) => [e.tool, e.state])).toEqual([
      ['create_ticket', 'confirmed'],
      ['send_email', 'confirmed'],
    ]);
    expect(view.effects[0]?.receipt).toMatch(/^\d+$/);
    expect(view.effects[1]?.idempotencyKey).toContain(runId);
    expect(view.effects[1]?.history.length).toBe(4);
  });

  it('a dispatch started shortly before the run deadline gets the minimum attempt, not what the deadline leaves', async () => {
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('NEAR'), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const timeouts: number[] = [];
    const note = defineWriteTool({
      name: 'note',
      description: 'n',
      args: z.object({ n: z.number() }).strict(),
      timeoutMs: 5000,
      service: { enforcesKey: true, reconcile: 'none' },
      dispatch: async (_args, _ctx, req) => {
        timeouts.push(req.timeoutMs);
        return { receipt: 'n-1', output: {}, replayed: false };
      },
    });
    const ctx = { runId: spec.runId, step: 1, signal: new AbortController().signal, input: spec.input };
    // Less than the minimum attempt is left (but the deadline has not passed): the request still gets the minimum.
    const deadlineAt = Date.now() + h.cfg.RECONCILE_MIN_ATTEMPT_MS - 500;
    await createEffectRunner(h.ctx, { workerId: 'w-near' }).run({
      tool: note,
      args: { n: 1 },
      call: { id: 'call_1_0' },
      ctx,
      tenant: 'acme',
      deadlineAt,
    });
    expect(timeouts).toEqual([h.cfg.RECONCILE_MIN_ATTEMPT_MS]);
  });
});
