/**
 * One real Redis for the suite: REDIS_URL when set, else an embedded
 * redis-server (AOF on, noeviction) on a free port, stopped at the end.
 * Each test file uses its own key prefix (testkit/harness.ts).
 */
import type { TestProject } from 'vitest/node';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';

let embedded: EmbeddedRedis | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.REDIS_URL;
  if (!url) {
    embedded = await startEmbeddedRedis();
    url = embedded.url;
  }
  project.provide('redisUrl', url);
}

export async function teardown(): Promise<void> {
  await embedded?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
