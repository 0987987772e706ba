/**
 * A plain BullMQ worker process for the recovery baseline (bench/sections/recovery.ts):
 * BullMQ's DEFAULT Worker options (lockDuration 30 s, stalledInterval 30 s,
 * lockRenewTime 15 s) and a processor that just holds its job for `holdMs`.
 *
 * The parent starts one Worker per queue over IPC ({cmd: 'start', queue, holdMs}),
 * so it controls when each Worker takes its job and starts its stall checker.
 *
 * On SIGTERM (env HOLD_ON_SIGTERM):
 *  - `default` (unset): no handler, which is what a plain BullMQ worker does unless
 *    its author adds one: Node's default action, the process dies at once and its
 *    jobs stay `active` until another worker's stall check finds their lock gone;
 *  - `close`: BullMQ's documented graceful shutdown, `await worker.close()` then exit:
 *    close() waits for the running processor (no timeout), so the job finishes in
 *    place and is never handed to another worker.
 */
import { Worker } from 'bullmq';

export type HoldMessage = { cmd: 'start'; queue: string; holdMs: number } | { cmd: 'exit' };
export type HoldReply =
  { type: 'hello'; pid: number } | { type: 'started'; queue: string } | { type: 'error'; error: string };

const url = new URL(process.env.HOLD_REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = process.env.HOLD_BULL_PREFIX ?? 'benchhold';
const onSigterm = process.env.HOLD_ON_SIGTERM ?? 'default';
const workers: Worker[] = [];

const send = (m: HoldReply): void => {
  if (process.connected) process.send!(m);
};

function start(queue: string, holdMs: number): void {
  const w = new Worker(
    queue,
    async () => {
      await new Promise((r) => setTimeout(r, holdMs));
      return 'held';
    },
    {
      // Only the connection and the prefix: every other option is BullMQ's default.
      connection: { host: url.hostname, port: Number(url.port), maxRetriesPerRequest: null },
      prefix,
    },
  );
  w.on('error', (err) => send({ type: 'error', error: `${queue}: ${err.message}` }));
  workers.push(w);
  void w.waitUntilReady().then(
    () => send({ type: 'started', queue }),
    (err: Error) => send({ type: 'error', error: `${queue}: ${err.message}` }),
  );
}

if (onSigterm === 'close') {
  process.on('SIGTERM', () => {
    void Promise.all(workers.map((w) => w.close())).finally(() => process.exit(0));
  });
}

process.on('message', (m: HoldMessage) => {
  if (m.cmd === 'start') start(m.queue, m.holdMs);
  else process.exit(0);
});
process.on('disconnect', () => process.exit(0));
send({ type: 'hello', pid: process.pid });
