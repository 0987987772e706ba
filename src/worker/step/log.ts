import type { Logger } from 'pino';

const LEVELS: ReadonlySet<string> = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = (): void => {};

/**
 * The step's child logger (runId, step, jobId, attempt on every line), made on
 * the first line actually written: pino's child() serializes and redacts its
 * bindings at once (several µs), and a read-only step on its happy path writes
 * no line at the usual levels.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(target, prop) {
      if (typeof prop === 'string' && LEVELS.has(prop) && !target.isLevelEnabled(prop)) return noop;
      child ??= target.child(bindings);
      const value: unknown = Reflect.get(child, prop, child);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(child) : value;
    },
  });
}
