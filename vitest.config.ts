import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2 cores: a few files at once, each with its own key prefix on a shared Redis.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
