/**
 * Validators for values handed over as `unknown` that stay the same object for
 * the whole run (a run's input: the worker caches the run spec), so
 * each object is parsed once, not at every step. A value that does not parse is
 * a TerminalError (`invalid_input`, with the paths of its issues): no retry makes
 * it valid.
 */
import type { z } from 'zod';
import { TerminalError } from './errors.js';

export function parseOnce<T>(schema: z.ZodType<T>, invalidMessage: string): (raw: unknown) => T {
  const parsed = new WeakMap<object, T>();
  return (raw) => {
    const key = typeof raw === 'object' && raw !== null ? raw : undefined;
    const known = key ? parsed.get(key) : undefined;
    if (known !== undefined) return known;
    const r = schema.safeParse(raw);
    if (!r.success)
      throw new TerminalError('invalid_input', invalidMessage, { issues: r.error.issues.map((i) => i.path.join('.')) });
    if (key) parsed.set(key, r.data);
    return r.data;
  };
}
