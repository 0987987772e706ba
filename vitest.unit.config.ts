/**
 * The fast tier (`npm run test:unit`): test/unit only, pure functions and files on disk, no
 * Redis (no globalSetup), no child processes, so a contributor runs it on every save.
 * `npm test` (vitest.config.ts) runs every tier with the suite's Redis.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    testTimeout: 10_000,
  },
});
