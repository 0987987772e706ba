/**
 * The run's event stream (what GET /v1/runs/:id/events serves): every step
 * starts, decides and commits; every ledger move of an effect is published; the
 * status change ends it. Ids and states only: no customer text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { emailTurn, final, read } from '../../testkit/turns.js';
import { spawnWorker } from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';

// The email's body must never show up in events or spans.
const script: Script = [read, emailTurn('SECRET-BODY'), final];

let h: Harness;
beforeAll(async () => {
  h = await createHarness('runevents');
});
afterAll(async () => {
  await h.close();
});

describe('run events', () => {
  it('publishes step started, decision, every effect transition, step committed and the final status, in order', async () => {
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('EV-1'), agent: { model: 'scripted', script } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    await h.startWorker();
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('completed');

    const events = (await readRunEvents(h.ctx, spec.runId)).map((e) => ({
      type: e.type,
      data: JSON.parse(e.data) as Record<string, unknown>,
    }));
    const summary = events.map((e) =>
      e.type === 'effect'
        ? `effect:${String(e.data.to)}`
        : e.type === 'status_changed'
          ? `status:${String(e.data.status)}`
          : `${e.type}@${String(e.data.step ?? '')}`,
    );
    expect(summary).toEqual([
      'run_created@',
      'step_started@1',
      'decision@1',
      'step_committed@1',
      'step_started@2',
      'decision@2',
      'effect:planned',
      'effect:authorized',
      'effect:dispatched',
      'effect:confirmed',
      'step_committed@2',
      'step_started@3',
      'decision@3',
      'step_committed@3',
      'status:completed',
    ]);
    const started = events.find((e) => e.type === 'step_started')!.data;
    expect(started).toMatchObject({ step: 1, jobId: `${spec.runId}.s1`, attempt: 1 });
    expect(typeof started.startedAt).toBe('number');
    expect(events.find((e) => e.type === 'decision' && e.data.step === 2)!.data.tools).toEqual(['send_email']);
    expect(JSON.stringify(events)).not.toContain('SECRET-BODY');
    expect(JSON.stringify(events)).not.toContain('ada@example.com');
  });

  it('a step resumed from its journalled decision after a crash announces its restart, and its decision once', async () => {
    // Its own namespace: no worker but the victim may take step 2 before it crashes.
    const hc = await createHarness('runevents-crash');
    try {
      const spec = buildSpec(
        hc.ctx,
        { tenant: 'acme', ticket: sampleTicket('EV-2'), agent: { model: 'scripted', script } },
        Date.now(),
      );
      await hc.ctx.store.create(spec, Date.now());
      const victim = await spawnWorker({
        ...hc.env,
        CRASH_POINTS: 'after_decision@2',
        LOCK_DURATION_MS: '1000',
        STALLED_INTERVAL_MS: '500',
      });
      expect((await victim.exited).signal).toBe('SIGKILL');
      await hc.startWorker();
      expect(await hc.waitForStatus(spec.runId, ['completed', 'failed'], 20_000)).toBe('completed');
      await expectStep2Events(hc, spec.runId);
    } finally {
      await hc.close();
    }
  });
});

/** Step 2 started twice (attempts 1 and 2), decided once, committed once. */
async function expectStep2Events(hc: Harness, runId: string) {
  const step2 = (await readRunEvents(hc.ctx, runId))
    .map((e) => ({ type: e.type, data: JSON.parse(e.data) as Record<string, unknown> }))
    .filter((e) => e.data.step === 2);
  expect(step2.filter((e) => e.type === 'step_started').map((e) => e.data.attempt)).toEqual([1, 2]);
  expect(step2.filter((e) => e.type === 'decision')).toHaveLength(1);
  expect(step2.filter((e) => e.type === 'step_committed')).toHaveLength(1);
}
