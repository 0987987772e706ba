/**
 * How a process that holds no job (the API, the reconciler) leaves on SIGTERM or SIGINT: it stops its work, closes its
 * connections and exits 0. Neither wait is unbounded. A stop waits for the work in flight (a reconciler's pass), and
 * that work waits on Redis: with Redis away, a command sent while its connection reconnects waits for the reconnection,
 * and a close waits the same way. Unbounded, such a process outlived SIGTERM for as long as Redis stayed away, and in
 * a test suite it outlived the suite. So the stop is cut at SHUTDOWN_GRACE_MS (`forced_exit`, exit 1: what was in
 * flight is a fenced script or nothing), the close at CONNECTIONS_CLOSE_TIMEOUT_MS (`close_timeout`, the work being
 * stopped), each said in the log. A second signal exits at once (onShutdownSignals, which the worker's own shutdown
 * uses too).
 */
import type { Logger } from 'pino';
import { settledWithin } from '../core/timeout.js';

/** How long a stopped process waits for its Redis connections to close (they hang while reconnecting). */
export const CONNECTIONS_CLOSE_TIMEOUT_MS = 2000;

export interface Leaving {
  log: Logger;
  /** The process's role, in its log lines. */
  role: string;
  graceMs: number;
  /** Stops the process's work (its loops, its servers), resolving when what was in flight has ended. */
  stop: () => Promise<void>;
  /** Closes its connections. */
  close: () => Promise<unknown>;
}

/**
 * Runs `first` on the process's first SIGTERM or SIGINT. A second signal exits at once (1, `forced_exit`), but not the
 * echo of Ctrl-C within a second of the first: the terminal signals the whole process group, and npm passes it on.
 */
export function onShutdownSignals(log: Logger, first: (signal: NodeJS.Signals) => Promise<void>): void {
  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (firstSignalAt > 0 && Date.now() - firstSignalAt < 1000) return;
    if (firstSignalAt > 0) {
      log.warn({ code: 'forced_exit', signal }, 'second signal: exiting now');
      process.exit(1);
    }
    firstSignalAt = Date.now();
    void first(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** Installs the SIGTERM and SIGINT handlers of a process that holds no job (see above). */
export function leaveOnSignals(leaving: Leaving): void {
  const { log, role, graceMs } = leaving;
  onShutdownSignals(log, async (signal) => {
    log.info({ code: 'shutdown_started', role, signal, graceMs }, 'stopping');
    if (!(await settledWithin(leaving.stop(), graceMs))) {
      log.error(
        { code: 'forced_exit', role, stage: 'stopping' },
        'work still in flight after the grace period: exiting',
      );
      process.exit(1);
    }
    if (!(await settledWithin(leaving.close(), CONNECTIONS_CLOSE_TIMEOUT_MS)))
      log.warn(
        { code: 'close_timeout', role, worker: 'connections', timeoutMs: CONNECTIONS_CLOSE_TIMEOUT_MS },
        'Redis connections did not close; the work is stopped, leaving anyway',
      );
    log.info({ code: 'shutdown_done', role }, `${role} stopped`);
    process.exit(0);
  });
}
