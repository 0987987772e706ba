/**
 * A pass run again and again, one at a time, a pause between the end of one and the start of the next: the loop of
 * the housekeepers that walk Redis on their own clock (the compactor, the archiver, the reconciler's sweep, the
 * worker's flow sweep and fetch watch).
 *
 * Each of them needs the same four things, and getting one wrong is quiet: a pass that throws must not end the
 * loop (it is reported and the next pass comes); two passes must never overlap (the next is scheduled only when one
 * has ended, so a slow pass stretches the period instead of piling up); a stop must cancel the pause and wait for the
 * pass in flight, so a process that closes its connections after stop() never has a pass still writing; and a loop
 * stopped once stays stopped.
 */
export interface PassLoopOptions {
  /** One pass. A rejection goes to onError; the loop goes on. */
  pass: () => Promise<unknown>;
  /** The pause between the end of a pass and the start of the next, ms (read before each pause). */
  intervalMs: number | (() => number);
  /** A pass that threw: log it, count it. Must not throw. */
  onError: (err: unknown) => void;
  /** The first pass after one pause instead of at once (default false). */
  pauseFirst?: boolean;
  /** The pause does not keep the process alive (default false). */
  unref?: boolean;
}

export class PassLoop {
  private timer?: NodeJS.Timeout;
  private inFlight?: Promise<void>;
  private state: 'idle' | 'running' | 'stopped' = 'idle';

  constructor(private readonly opts: PassLoopOptions) {}

  /** Whether the loop was started and not stopped. */
  get running(): boolean {
    return this.state === 'running';
  }

  /** Starts the loop; a second start, or a start after stop(), does nothing. */
  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    if (this.opts.pauseFirst) this.pause();
    else this.runPass();
  }

  /** Cancels the pause and waits for the pass in flight; no pass starts after it. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  private runPass(): void {
    this.timer = undefined;
    this.inFlight = this.opts
      .pass()
      .then(
        () => undefined,
        (err: unknown) => this.opts.onError(err),
      )
      .finally(() => {
        if (this.state === 'running') this.pause();
      });
  }

  private pause(): void {
    const { intervalMs } = this.opts;
    this.timer = setTimeout(() => this.runPass(), typeof intervalMs === 'function' ? intervalMs() : intervalMs);
    if (this.opts.unref) this.timer.unref();
  }
}
