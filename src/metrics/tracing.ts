/**
 * OpenTelemetry spans per step, model call and effect (TRACING, off by
 * default). One tracer per process, passed in through the AppContext, never
 * registered globally. With tracing off there is no tracer and `inSpan` just
 * runs its function: no span objects on the hot path.
 *
 * Spans carry the run id and step as attributes (a trace backend is where a
 * run id belongs; metrics labels never carry it) and tool names, action ids
 * and ledger states; never arguments or customer text.
 */
import { SpanStatusCode, context, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider, BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';

export interface Tracing {
  /** Undefined when tracing is off. */
  tracer?: Tracer;
  /** Flushes spans still buffered and stops the exporter. */
  shutdown(): Promise<void>;
}

export interface TracingConfig {
  TRACING: 'off' | 'console' | 'otlp';
  /** OTLP/HTTP traces endpoint, e.g. http://otel-collector:4318/v1/traces. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
}

export const TRACING_OFF: Tracing = { shutdown: async () => {} };

/** @param exporter overrides the configured exporter (tests pass an in-memory one, exported at once). */
export function createTracing(cfg: TracingConfig, service: string, exporter?: SpanExporter): Tracing {
  if (cfg.TRACING === 'off' && !exporter) return TRACING_OFF;
  const processor = exporter
    ? new SimpleSpanProcessor(exporter)
    : cfg.TRACING === 'console'
      ? new SimpleSpanProcessor(new ConsoleSpanExporter())
      : new BatchSpanProcessor(new OTLPTraceExporter(cfg.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? { url: cfg.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT } : {}));
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': `agent-fleet-${service}` }),
    spanProcessors: [processor],
  });
  return { tracer: provider.getTracer('durable-agent-fleet'), shutdown: () => provider.shutdown() };
}

/**
 * Runs `fn` inside a span that is a child of `parent` (an OTel context carrying
 * the parent span, or none for a root span). The span ends when `fn` settles; a
 * throw marks it as an error and is rethrown. Without a tracer, `fn` runs alone.
 */
export async function inSpan<T>(
  tracer: Tracer | undefined, name: string, attributes: Attributes, parent: Context | undefined,
  fn: (span: Span | undefined, ctx: Context | undefined) => Promise<T>,
): Promise<T> {
  if (!tracer) return fn(undefined, undefined);
  const span = tracer.startSpan(name, { attributes }, parent ?? context.active());
  const ctx = trace.setSpan(parent ?? context.active(), span);
  try {
    return await fn(span, ctx);
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}
