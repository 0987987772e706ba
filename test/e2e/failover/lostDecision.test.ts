/**
 * A decision the failover took back is never acted on: the duplicate ticket of the Sentinel campaign, driven step by
 * step with real processes (a master, two replicas and three sentinels from testkit/sentinel.ts, one worker process,
 * the sandbox, and the campaign's model stand-in that answers differently every time it is asked).
 *
 * The interleaving: the worker commits step 1 (read_ticket) and stops (PAUSE_POINTS after_commit@1=stop: SIGSTOP);
 * the replicas catch up and are frozen (and their links filled, so nothing more reaches them); the worker is resumed,
 * asks the model for step 2 (create_ticket), journals the decision on the master alone, and stops again
 * (after_decision@2=stop) while the master is SIGKILLed, the replicas resumed and one promoted; then it is resumed.
 * The delivery then goes on where its connection now is: the promoted replica, whose journal has no decision for
 * step 2. Before the fence, the action was planned and dispatched there (its intent waited for and witnessed on the
 * promoted master, so the wait passed): a ticket for a decision the store no longer had, and a transcript without
 * that turn, so the model was asked for it again and a second ticket opened. Now the plan is refused
 * (`decision_not_journalled`), the step's redelivery decides on the promoted master, and one ticket leaves.
 *
 * The worker's stalls end when the test resumes it, not after a time: under the suite's load the timed pauses this
 * test had (4 s and 12 s) ended before the test was done, and the delivery went another way. Step 2 decided before
 * the replicas were frozen and their links filled: the promoted replica had the decision, nothing was lost. Or the
 * delivery woke before its master was killed: it planned there, where the decision still was, and its dispatch waited
 * for the frozen replicas (`not_replicated`, nothing sent) until the kill took the plan and the decision; the retry
 * decided again on the promoted master. One ticket either way, but the fence was never asked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { startSandbox, type SandboxHandle } from '../../../sandbox/server.js';
import { startOpenAIServer, type OpenAIServer } from '../../../testkit/modelServers/openai.js';
import { startLocalSentinel, SENTINEL_MASTER, type LocalSentinel } from '../../../testkit/sentinel.js';
import { freePort } from '../../../testkit/embeddedRedis.js';
import { KeySpace } from '../../../src/store/keys.js';
import { isStopped, spawnApi, spawnWorker, type WorkerProcess } from '../../../testkit/processes.js';
import { onLines } from '../../../testkit/spawnModule.js';
import { unsteadyModel } from './campaign.js';
import type { ChildProcess } from 'node:child_process';
import { until } from '../../../testkit/until.js';

const TOKEN = 'lost-decision-producer';

describe('a decision lost in a failover is not acted on', () => {
  let s: LocalSentinel;
  let sandbox: SandboxHandle;
  let model: OpenAIServer;
  let worker: WorkerProcess | undefined;
  let api: ChildProcess | undefined;
  let reader: Redis;
  const prefix = `ld${randomBytes(3).toString('hex')}`;
  const keys = new KeySpace(prefix, `${prefix}b`, 1);

  beforeAll(async () => {
    s = await startLocalSentinel({ replicas: 2 });
    sandbox = await startSandbox({ port: 0 });
    model = await startOpenAIServer();
    // The campaign's model, except that each ticket it asks for has another subject (another action identity): at
    // random, a re-asked turn would pick the first one's subject half of the time, and the ledger would answer it.
    let tickets = 0;
    model.respond = (req) => {
      const reply = unsteadyModel(req);
      const call = reply.kind === 'turn' ? reply.toolCalls?.find((c) => c.name === 'create_ticket') : undefined;
      if (call) {
        const args = call.args as { subject: string; sourceTicketId: string };
        args.subject = `Follow-up on ${args.sourceTicketId}: ${tickets++ % 2 === 0 ? 'delivery' : 'damage'}`;
      }
      return reply;
    };
    reader = new Redis({
      sentinels: s.sentinels.map((x) => ({ host: '127.0.0.1', port: Number(x.split(':')[1]) })),
      name: SENTINEL_MASTER,
    });
    // Its reconnects through the failover are expected; a read it is asked for fails by its promise.
    reader.on('error', () => {});
  }, 60_000);
  afterAll(async () => {
    // The fleet first (and gone), so no connection of it holds the model, the sandbox or a node while they stop.
    const exited = (c: ChildProcess | undefined) =>
      new Promise((r) => (!c || c.exitCode !== null || c.signalCode !== null ? r(undefined) : c.once('exit', r)));
    worker?.child.kill('SIGKILL');
    api?.kill('SIGKILL');
    await Promise.all([exited(worker?.child), exited(api)]);
    reader?.disconnect();
    for (const n of s?.nodes.values() ?? []) n.process.kill('SIGCONT');
    await s?.stop();
    await model?.close();
    await sandbox?.close();
  });

  it('the delivery that made it plans nothing on the promoted replica; one ticket, one email', async () => {
    const apiPort = await freePort();
    const env: Record<string, string> = {
      REDIS_SENTINELS: s.sentinels.join(','),
      REDIS_SENTINEL_MASTER: SENTINEL_MASTER,
      KEY_PREFIX: prefix,
      BULL_PREFIX: `${prefix}b`,
      SANDBOX_URL: sandbox.url,
      MODEL_PROVIDER: 'openai',
      OPENAI_BASE_URL: `${model.url}/v1`,
      OPENAI_API_KEY: 'sk-test',
      PRODUCER_TOKEN: TOKEN,
      REDIS_MIN_REPLICAS: '1',
      // Long enough for the other replica to follow the promoted one: the lost decision's dispatch then waits and
      // passes, as it did in the campaign (a short wait would only delay it).
      REDIS_REPLICA_WAIT_MS: '15000',
      STORE_RETRY_AFTER_S: '1',
      // Nothing takes the job from the delivery while it stalls: the owner watch is off and the lock outlives the
      // stall and the failover (the delivery is the slow owner no one has declared dead yet).
      OWNER_WATCH_MS: '0',
      LOCK_DURATION_MS: '60000',
      RETRY_BASE_MS: '50',
      RETRY_MAX_MS: '200',
      WORKER_CONCURRENCY: '1',
      REDIS_BOOT_TIMEOUT_MS: '20000',
      PORT: String(apiPort),
      HOST: '127.0.0.1',
    };
    // The API, to create the run (its 201 waits for a replica).
    api = (await spawnApi(env, { keep: 'lifecycle' })).child;
    worker = await spawnWorker(
      { ...env, PAUSE_POINTS: 'after_commit@1=stop,after_decision@2=stop' },
      { startTimeoutMs: 60_000, keep: 'lifecycle', exitBeforeStart: 'return' },
    );
    const lines: string[] = [];
    onLines(worker.child.stdout!, (l) => lines.push(l));

    const res = await fetch(`http://127.0.0.1:${apiPort}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'ld-1' },
      body: JSON.stringify({
        tenant: 'acme',
        ticket: {
          id: 'LD-1',
          subject: 'Broken mug',
          body: 'It arrived shattered.',
          customer: { email: 'ld@example.com', name: 'L D' },
        },
      }),
    });
    expect(res.status).toBe(201);
    const { runId } = (await res.json()) as { runId: string };
    const runKey = keys.run(runId).run;

    // Step 1 committed: the worker stops. The replicas catch up, then are frozen.
    const stopped = (what: string) => until(`the worker stopped ${what}`, 30_000, () => isStopped(worker!.pid));
    const master = await s.masterPort();
    const direct = new Redis({ port: master, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    direct.on('error', () => {});
    await until('step 1 committed', 30_000, async () => (await direct.hget(runKey, 'cursor')) === '2');
    await stopped('after step 1 committed');
    expect(Number(await direct.call('WAIT', 2, 5000))).toBe(2);
    const replicas = [...s.nodes.keys()].filter((p) => p !== master);
    for (const p of replicas) s.nodes.get(p)!.process.kill('SIGSTOP');
    // Fills the replication links' socket buffers: what the master writes next stays in its own output buffer.
    await direct.set(`${prefix}:ballast`, Buffer.alloc(32 * 1024 * 1024, 1));

    // Step 2's decision journalled on the master alone: the worker stops again.
    worker.child.kill('SIGCONT');
    await until('step 2 decided', 30_000, async () => (await direct.hget(runKey, 'decidedStep')) === '2');
    await stopped('after step 2 decided');
    direct.disconnect();
    await s.kill(master, 'SIGKILL');
    for (const p of replicas) s.nodes.get(p)!.process.kill('SIGCONT');
    const promoted = await s.waitForFailover(master, 30_000);
    // The promoted master does not have the decision: the failover took it back.
    const onPromoted = new Redis({ port: promoted, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    const decidedThere = await onPromoted.hget(runKey, 'decidedStep').finally(() => onPromoted.disconnect());
    expect(decidedThere).not.toBe('2');

    // The delivery is resumed and goes on against the promoted master; the run ends.
    worker.child.kill('SIGCONT');
    // The reader follows the failover: a read that meets it is a read that has not seen the end yet.
    await until('run terminal', 90_000, async () => {
      const status = await reader.hget(runKey, 'status').catch(() => null);
      return status !== null && !['running', 'queued'].includes(status) && status;
    });
    expect(await reader.hget(runKey, 'status')).toBe('completed');
    const tickets = sandbox.records('tickets').filter((r) => String(r.resource.subject ?? '').includes('on LD-1:'));
    expect(tickets.map((t) => t.resource.subject)).toHaveLength(1);
    expect(sandbox.records('emails')).toHaveLength(1);
    // The lost decision's delivery was refused where it would have planned its action.
    expect(lines.some((l) => l.includes('"decision_not_journalled"'))).toBe(true);
  }, 180_000);
});
