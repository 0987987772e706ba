/**
 * Tracing (TRACING, off by default): one span per step with the run id as an
 * attribute, a model-call span and an effect span as its children; and none of
 * it when tracing is off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../testkit/until.js';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { createTracing } from '../../src/metrics/tracing.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { emailTurn, final, read } from '../../testkit/turns.js';

// The email's body must never show up in events or spans.
const script: Script = [read, emailTurn('SECRET-BODY'), final];

let h: Harness;
beforeAll(async () => {
  h = await createHarness('tracing');
});
afterAll(async () => {
  await h.close();
});

describe('tracing', () => {
  it('is off by default: no tracer, no spans', () => {
    expect(h.cfg.TRACING).toBe('off');
    expect(h.ctx.tracing.tracer).toBeUndefined();
  });

  it('spans each step, its model call and its effect, with the run id, and no customer text', async () => {
    const exporter = new InMemorySpanExporter();
    const ctx = await createContext(h.cfg, 'tracing', {
      log: createLogger('tracing', 'silent'),
      metrics: newMetrics(),
      tracing: createTracing({ TRACING: 'console' }, 'test', exporter),
    });
    await h.startWorker({}, ctx);
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('TR-1'), agent: { model: 'scripted', script } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('completed');
    // The last step's span ends just after its commit made the run visible as completed: wait for it.
    await until(
      'three step spans',
      10_000,
      () => exporter.getFinishedSpans().filter((s) => s.name === 'agent.step').length >= 3,
    );

    const spans = exporter.getFinishedSpans();
    const steps = spans.filter((s) => s.name === 'agent.step');
    expect(steps.map((s) => s.attributes['agent.step'])).toEqual([1, 2, 3]);
    for (const s of steps) expect(s.attributes['agent.run_id']).toBe(spec.runId);
    const models = spans.filter((s) => s.name === 'agent.model');
    expect(models).toHaveLength(3);
    const [effect] = spans.filter((s) => s.name === 'agent.effect');
    expect(effect?.attributes).toMatchObject({
      'agent.run_id': spec.runId,
      'agent.step': 2,
      'agent.tool': 'send_email',
      'agent.result': 'ok',
      'agent.ledger_state': 'confirmed',
    });
    // Parented: the effect and the model call of step 2 belong to step 2's span, in one trace.
    const step2 = steps.find((s) => s.attributes['agent.step'] === 2)!;
    expect(effect!.parentSpanContext?.spanId).toBe(step2.spanContext().spanId);
    expect(effect!.spanContext().traceId).toBe(step2.spanContext().traceId);
    expect(
      models.some(
        (m) =>
          m.parentSpanContext?.spanId === step2.spanContext().spanId &&
          m.attributes['agent.tools']?.toString() === 'send_email',
      ),
    ).toBe(true);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('SECRET-BODY');
  });
});
