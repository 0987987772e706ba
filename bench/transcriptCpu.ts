/**
 * `node dist/bench/transcriptCpu.js [steps] [--runs=20]` (after `npm run build`; default 200 steps): the worker's CPU
 * to read a run's transcript at a step (src/runs/transcriptCache.ts), what every step of a model that is sent the
 * conversation (OpenAI's, Anthropic's) does before its call. `runs` runs each append one entry and are read again, all
 * in flight, `steps` times, on the engine's own connection (BullMQ's commands defined on it, as in a worker); the
 * median CPU per read is printed. For finding what a step costs; not part of `npm run bench`.
 */
import { createBenchEnv } from './lib/env.js';
import { flag, positionals } from './lib/args.js';
import { median } from './lib/stats.js';
import { TranscriptCache } from '../src/runs/transcriptCache.js';
import { encodeEntry, packEntry, type JournalEntry } from '../src/core/journal.js';

const steps = Number(positionals()[0] ?? 200);
const runs = Number(flag('runs', '20'));
const env = await createBenchEnv({ quick: true, rounds: 1 });
const r = env.ctx.redis;
try {
  await Promise.all(env.ctx.queues.all().map((q) => q.waitUntilReady()));
  const entry = (step: number): JournalEntry => ({
    v: 1,
    kind: 'observation',
    step,
    callId: `call_${step}_0`,
    tool: 'lookup_order',
    status: 'ok',
    output: { text: 'The parcel left the depot on Tuesday and is due on Friday.' },
  });
  const journals = Array.from({ length: runs }, (_, i) => env.ctx.keys.run(`r_transcript_cpu_${i}`).journal);
  const cache = new TranscriptCache();
  await Promise.all(journals.map((k) => r.rpush(k, packEntry(encodeEntry(entry(1))))));
  await Promise.all(journals.map((k, i) => cache.load(r, `r_transcript_cpu_${i}`, k)));
  const perRead: number[] = [];
  for (let step = 2; step <= steps; step++) {
    await Promise.all(journals.map((k) => r.rpush(k, packEntry(encodeEntry(entry(step))))));
    const c0 = process.cpuUsage();
    await Promise.all(journals.map((k, i) => cache.load(r, `r_transcript_cpu_${i}`, k)));
    const c = process.cpuUsage(c0);
    perRead.push((c.user + c.system) / runs);
  }
  console.log(
    `TranscriptCache.load, one new entry, ${runs} in flight: median ${median(perRead).toFixed(1)} µs CPU per read ` +
      `(over ${steps - 1} steps)`,
  );
} finally {
  await env.cleanup();
}
