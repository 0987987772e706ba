/**
 * The fast tier (`npm run test:unit`): test/unit only, pure functions and files on disk, no
 * Redis (no globalSetup), no child processes, so a contributor runs it on every save.
 * `npm test` (vitest.config.ts) runs every tier with the suite's Redis.
 *
 * Most of the tier's time was spent importing, not testing: each file in a fresh worker loaded
 * the BPE tokenizer's ranks, BullMQ, zod and the OpenTelemetry SDK again (about 20 s of 35 s).
 * Threads without isolation load them once per worker. That is safe here because these tests
 * keep no state between files: they mock no module, stub no global or environment variable,
 * and build their own metrics registry, catalog and stores.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    testTimeout: 10_000,
    pool: 'threads',
    isolate: false,
  },
});
