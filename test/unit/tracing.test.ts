/** The one tracing interceptor: a no-op without a tracer, one span with its outcome with one. */
import { describe, expect, it } from 'vitest';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { createTracing, traced } from '../../src/metrics/tracing.js';

describe('traced', () => {
  it('without a tracer: runs fn alone, computes no attributes', async () => {
    let computed = 0;
    const r = await traced(
      undefined,
      { name: 'x', attributes: () => (computed++, {}), outcome: () => (computed++, {}) },
      async (ctx) => {
        expect(ctx).toBeUndefined();
        return 42;
      },
    );
    expect(r).toBe(42);
    expect(computed).toBe(0);
  });

  it("without a tracer: hands back fn's own promise (no async frame around it)", () => {
    const answer = Promise.resolve(7);
    expect(traced(undefined, { name: 'x', attributes: () => ({}) }, () => answer)).toBe(answer);
  });

  it('with a tracer: one span with its attributes and outcome; children are parented; a throw is recorded and rethrown', async () => {
    const exporter = new InMemorySpanExporter();
    const { tracer, shutdown } = createTracing({ TRACING: 'off' }, 'unit', exporter);
    const r = await traced(
      tracer,
      { name: 'outer', attributes: () => ({ a: 1 }), outcome: (n: number) => ({ out: n }) },
      async (ctx) => {
        expect(trace.getSpan(ctx!)).toBeDefined();
        await expect(
          traced(tracer, { name: 'inner', attributes: () => ({}), parent: ctx }, async () => {
            throw new Error('boom');
          }),
        ).rejects.toThrow('boom');
        return 7;
      },
    );
    expect(r).toBe(7);
    const spans = exporter.getFinishedSpans();
    const outer = spans.find((s) => s.name === 'outer')!;
    const inner = spans.find((s) => s.name === 'inner')!;
    expect(outer.attributes).toEqual({ a: 1, out: 7 });
    expect(inner.parentSpanContext?.spanId ?? (inner as unknown as { parentSpanId?: string }).parentSpanId).toBe(
      outer.spanContext().spanId,
    );
    expect(inner.status.code).toBe(2);
    expect(inner.events.some((e) => e.name === 'exception')).toBe(true);
    await shutdown();
  });
});
