/**
 * OpenTelemetry spans per step, model call and effect (TRACING, off by
 * default). One tracer per process, passed in through the EngineContext, never
 * registered globally. Code is traced through one interceptor, `traced`: with
 * tracing off there is no tracer and it just runs its function (no span
 * objects, no attribute objects on the hot path).
 *
 * Spans carry the run id and step as attributes (a trace backend is where a
 * run id belongs; metrics labels never carry it) and tool names, action ids
 * and ledger states; never arguments or customer text.
 */
import {
  SpanStatusCode,
  context,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
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
      : new BatchSpanProcessor(
          new OTLPTraceExporter(
            cfg.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? { url: cfg.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT } : {},
          ),
        );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': `agent-fleet-${service}` }),
    spanProcessors: [processor],
  });
  return { tracer: provider.getTracer('durable-agent-fleet'), shutdown: () => provider.shutdown() };
}

export interface SpanSpec<T> {
  name: string;
  /** Computed only when tracing is on. */
  attributes: () => Attributes;
  /** An OTel context carrying the parent span (the step's, handed on as ToolContext.trace), or none for a root span. */
  parent?: Context | undefined;
  /** Attributes of the outcome, set on the span when `fn` resolves (only when tracing is on). */
  outcome?: (result: T) => Attributes | Promise<Attributes>;
}

/**
 * The one tracing interceptor: runs `fn` inside a span that is a child of
 * `spec.parent`, handing `fn` the context that carries it (for its children).
 * The span ends when `fn` settles; a throw marks it as an error and is
 * rethrown unchanged. Without a tracer, `fn(undefined)` runs alone.
 */
export function traced<T>(
  tracer: Tracer | undefined,
  spec: SpanSpec<T>,
  fn: (ctx: Context | undefined) => Promise<T>,
): Promise<T> {
  // Tracing off: fn's own promise, without an async frame around it (two per step).
  return tracer ? tracedSpan(tracer, spec, fn) : fn(undefined);
}

async function tracedSpan<T>(
  tracer: Tracer,
  spec: SpanSpec<T>,
  fn: (ctx: Context | undefined) => Promise<T>,
): Promise<T> {
  const parent = spec.parent ?? context.active();
  const span: Span = tracer.startSpan(spec.name, { attributes: spec.attributes() }, parent);
  try {
    const result = await fn(trace.setSpan(parent, span));
    if (spec.outcome) span.setAttributes(await spec.outcome(result));
    return result;
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}
