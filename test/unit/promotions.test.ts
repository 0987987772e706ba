/**
 * One way to promote a delayed job: promoteIfDelayed (src/store/queues.ts). Several processes promote the same job,
 * so a promotion that finds it gone from the delayed set is an answer (false), not an error; any other failure is a
 * store error its caller names. A promotion written by hand either threw the race at a caller or swallowed the store
 * error with it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '../../src');

describe('promotions', () => {
  it("no module but src/store/queues.ts calls BullMQ's promote", () => {
    const callers = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && /\.promote\(\)/.test(readFileSync(join(src, f), 'utf8')))
      .sort();
    expect(callers).toEqual(['store/queues.ts']);
  });
});
