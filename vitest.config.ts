import { defineConfig } from 'vitest/config';
import TierSequencer from './test/support/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2 cores: a few files at once, each with its own key prefix on a shared Redis.
    maxWorkers: 2,
    fileParallelism: true,
    // Each file in a fresh worker imported the engine again (BullMQ, zod, the tokenizer's ranks, the OpenTelemetry
    // SDK): 340 s of the integration tier's 390. A worker without isolation imports them once. Safe for the same
    // reasons as the unit tier's (vitest.unit.config.ts): no test mocks a module or stubs a global or an environment
    // variable; each file builds its own key prefix, metrics registry, catalog and stores; what runs apart from the
    // test (a worker, an API, a redis-server) is a process of its own.
    isolate: false,
    // Processes first, pure code last: the longest files are not the largest (test/support/sequencer.ts).
    sequence: { sequencer: TierSequencer },
  },
});
