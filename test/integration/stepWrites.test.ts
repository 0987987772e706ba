/**
 * What a read-only step's commit writes to a run's own keys (what the AOF and a replica's link carry for it, a
 * script persisting as its effects): the journal entries, the budget counters in one HSET (not an HINCRBY each), the
 * run hash's cursor, updatedAt and jobId (a run that stays running keeps its status and reason unwritten), and one
 * event entry without a cap while its stream is below it; and what its copies of BullMQ's completion and add leave
 * out (src/store/bullmqInternals.ts, STEP_JOB_EDITS). Seen with MONITOR, which lists the commands a script runs.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { captureCommands } from '../../bench/lib/monitorTrace.js';
import { createHarness, redisUrl, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { final, read } from '../../testkit/turns.js';
import { COMPLETED_TRIM_EVERY } from '../../src/store/bullmqInternals.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('stepwrites');
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

it("a read-only step's commit writes each of the run's keys once, and only what moved", async () => {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`SW-${Date.now()}`),
      agent: { model: 'scripted', script: [read, read, read, final] },
    },
    Date.now(),
  );
  const k = h.ctx.keys.run(spec.runId);
  const url = new URL(redisUrl());
  const monitor = await captureCommands(Number(url.port), url.hostname, { scriptCalls: true });
  let commands: string[][] = [];
  let clients: string[] = [];
  try {
    expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
  } finally {
    // stop() waits for its end marker: MONITOR's lines can trail the commands that made the run complete.
    const traced = await monitor.stop();
    commands = traced.map((c) => c.args.map((a) => a.toString('utf8')));
    clients = traced.map((c) => c.client);
  }
  // What each commit ran (a function's own calls follow its line): no upkeep of BullMQ's event stream, which the
  // engine's commit never appends to (src/store/bullmqInternals.ts): no append, no trim, no read of its cap.
  const commitCalls: string[][][] = [];
  let current: string[][] | undefined;
  commands.forEach((args, i) => {
    if (clients[i] === 'lua') return void current?.push(args);
    current = args[0]!.toUpperCase() === 'FCALL' && args[1]!.startsWith('commitStep_') ? [] : undefined;
    if (current) commitCalls.push(current);
  });
  const commits = commitCalls.filter((c) => c.some((a) => a[0]!.toUpperCase() === 'RPUSH' && a[1] === k.journal));
  expect(commits.length).toBeGreaterThanOrEqual(4);
  for (const calls of commits) {
    const names = calls.map((a) => a[0]!.toUpperCase());
    expect(names).not.toContain('XTRIM');
    expect(calls.filter((a) => a.includes('opts.maxLenEvents'))).toEqual([]);
    expect(calls.filter((a) => a[0]!.toUpperCase() === 'XADD' && a[1] !== k.events)).toEqual([]);
  }
  const seen = commands.filter((args) => args.some((a) => a === k.run || a === k.budget || a === k.events));
  const writes = (cmd: string, key: string) => seen.filter((a) => a[0]!.toUpperCase() === cmd && a[1] === key);
  // Steps 2 and 3 stay running: their commits are the HSETs of the run hash that set the cursor to 3 and 4.
  const cursorSets = writes('HSET', k.run).filter((a) => a[2] === 'cursor' && ['3', '4'].includes(a[3]!));
  expect(cursorSets).toHaveLength(2);
  for (const a of cursorSets) {
    expect(a.filter((_, i) => i >= 2 && i % 2 === 0)).toEqual(['cursor', 'updatedAt', 'jobId']);
  }
  expect(writes('HINCRBY', k.budget)).toEqual([]);
  // The run's creation sets the counters to 0; each commit after it, to what they hold then.
  const budgetSets = writes('HSET', k.budget).filter((a) => a.includes('stepsUsed') && a.includes('costUsed'));
  // One per committed step (four), each naming every counter that moved.
  expect(budgetSets).toHaveLength(4);
  for (const a of budgetSets) expect(a.slice(2).filter((_, i) => i % 2 === 0)).toContain('tokensUsed');
  // Below its cap, the stream's entries carry none.
  const xadds = writes('XADD', k.events);
  expect(xadds.length).toBeGreaterThan(0);
  expect(xadds.filter((a) => a.some((x) => x.toUpperCase() === 'MAXLEN'))).toEqual([]);
  // The counters add up as HINCRBY's did.
  const tokens = (await h.ctx.store.transcript(spec.runId))
    .flatMap((e) => (e.kind === 'decision' ? [e.usage.promptTokens + e.usage.completionTokens] : []))
    .reduce((a, b) => a + b, 0);
  expect(await h.ctx.redis.hmget(k.budget, 'stepsUsed', 'tokensUsed')).toEqual(['4', String(tokens)]);
});

it("a step's commit makes none of the calls its copies of BullMQ's scripts leave out", async () => {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`SJ-${Date.now()}`),
      agent: { model: 'scripted', script: [read, read, read, read, read, read, read, read, read, final] },
    },
    Date.now(),
  );
  const k = h.ctx.keys.run(spec.runId);
  const url = new URL(redisUrl());
  const monitor = await captureCommands(Number(url.port), url.hostname, { scriptCalls: true });
  const commitCalls: string[][][] = [];
  try {
    expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
  } finally {
    let current: string[][] | undefined;
    for (const c of await monitor.stop()) {
      const args = c.args.map((a) => a.toString('utf8'));
      if (c.client === 'lua') current?.push(args);
      else {
        current = args[0]!.toUpperCase() === 'FCALL' && args[1]!.startsWith('commitStep_') ? [] : undefined;
        if (current) commitCalls.push(current);
      }
    }
  }
  const commits = commitCalls.filter((c) => c.some((a) => a[0]!.toUpperCase() === 'RPUSH' && a[1] === k.journal));
  expect(commits).toHaveLength(10);
  const queuePrefix = h.ctx.keys.queueKeyPrefix(h.ctx.keys.shardOf(spec.runId));
  let trims = 0;
  for (const calls of commits) {
    const named = (cmd: string) => calls.filter((a) => a[0]!.toUpperCase() === cmd);
    // Nothing about children, a parent or a deduplication id: a step job has none.
    expect(named('SCARD').filter((a) => a[1]!.endsWith(':dependencies'))).toEqual([]);
    expect(named('ZCARD').filter((a) => a[1]!.endsWith(':unsuccessful'))).toEqual([]);
    expect(named('HMGET').filter((a) => a.includes('parentKey'))).toEqual([]);
    // The job's lock read once, by the fence; then removed.
    expect(named('GET').filter((a) => a[1]!.endsWith(':lock'))).toHaveLength(1);
    expect(named('DEL').filter((a) => a[1]!.endsWith(':lock'))).toHaveLength(1);
    // The queue's id counter is not taken for a job with an id of its own.
    expect(named('INCR').filter((a) => a[1] === `${queuePrefix}id`)).toEqual([]);
    // The queue's marker set once: by the add, or (a run's last step adds no job) by the fetch of the next job; its
    // settings read once.
    expect(named('ZADD').filter((a) => a[1] === `${queuePrefix}marker`).length).toBeLessThanOrEqual(1);
    expect(named('HMGET').filter((a) => a[1] === `${queuePrefix}meta`)).toHaveLength(1);
    if (named('ZREMRANGEBYRANK').some((a) => a[1] === `${queuePrefix}completed`)) trims++;
  }
  // The completed window is trimmed by one completion in COMPLETED_TRIM_EVERY of the worker, not by every one.
  expect(trims).toBeGreaterThanOrEqual(Math.floor(commits.length / COMPLETED_TRIM_EVERY));
  expect(trims).toBeLessThanOrEqual(Math.ceil(commits.length / COMPLETED_TRIM_EVERY));
});
