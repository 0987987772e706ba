/**
 * One way to promote a delayed job: promoteIfDelayed (src/store/queues.ts). Several processes promote the same job,
 * so a promotion that finds it gone from the delayed set is an answer (false), not an error; any other failure is a
 * store error its caller names. A promotion written by hand either threw the race at a caller or swallowed the store
 * error with it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '../../src');
const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );

describe('promotions', () => {
  it("no module but src/store/queues.ts calls BullMQ's promote", () => {
    const callers = walk(src)
      .filter((f) => /\.promote\(\)/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(src, f));
    expect(callers).toEqual(['store/queues.ts']);
  });
});
