/**
 * A step's streamed answer text, batched into the run's event stream.
 *
 * The provider hands text pieces to `push` as they arrive; they are written as
 * one `text_delta` event per batch (at most `flushMs` after the batch's first
 * character, or at once when it holds `flushChars`), one write in flight at a
 * time, so the events keep the model's order. Each write is fenced by the
 * step's job lock (appendTextDeltas-3.lua): a worker that lost the step writes
 * nothing more, and the first batch of another delivery of the same step is
 * preceded by `step_restarted`.
 *
 * Failure behaviour: a refused or failed write stops this attempt's stream
 * (logged, counted in agent_text_delta_batches_total) and never fails the step:
 * the step's own fenced journal/commit decides whether its work counts. If the
 * process dies mid-answer, the text already written stays in the stream and the
 * next delivery's first batch announces the restart.
 */
import type { Logger } from 'pino';
import { FenceError } from '../core/errors.js';
import type { CrashPoints } from '../config/testHooks.js';
import type { Metrics } from '../metrics/metrics.js';
import type { RedisClient } from '../store/connect.js';
import { appendTextDeltas, type AppendTextDeltasKeys } from '../store/calls/appendTextDeltas.js';

export interface TextStreamOptions {
  redis: RedisClient;
  keys: AppendTextDeltasKeys;
  token: string;
  step: number;
  jobId: string;
  /** The job's delivery number (BullMQ attemptsStarted): with the model attempt it names who wrote the text. */
  jobAttempt: number;
  /** Tells apart two jobs made for the same step (BullMQ's job.timestamp: the job's creation). */
  jobInstance: number;
  /** Whether another delivery may have streamed this step before (a redelivery or a resumed job). */
  redelivered: boolean;
  eventsMaxLen: number;
  flushMs: number;
  flushChars: number;
  /** This delivery's step_started event: the first batch carries it when nothing else has emitted it yet. */
  startedEvent: string;
  metrics: Metrics;
  log: Logger;
  /** Test-only: `mid_stream` fires after the first batch of an answer is written (the answer half sent). */
  crash?: Pick<CrashPoints, 'hit'>;
}

/** One delivery of a step: hands out one AttemptStream per model attempt. */
export class TextStream {
  private started = false;

  constructor(private readonly o: TextStreamOptions) {}

  /** Whether a batch carried this delivery's step_started event (later scripts must not emit it again). */
  get startedEmitted(): boolean {
    return this.started;
  }

  attempt(modelAttempt: number): AttemptStream {
    const delivery = `${this.o.jobAttempt}.${modelAttempt}`;
    const ids = {
      delivery,
      deliveryKey: `${this.o.jobInstance}-${delivery}`,
      mayFollowAnother: this.o.redelivered || modelAttempt > 1,
    };
    return new AttemptStream(this.o, ids, {
      pending: () => (this.started ? '' : this.o.startedEvent),
      written: () => void (this.started = true),
    });
  }
}

export class AttemptStream {
  private buffer = '';
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;

  /**
   * @param ids `delivery` (shown in events), `deliveryKey` (compared by the script), and whether
   *   another delivery or attempt may have streamed this step before (then a text-less answer writes a marker).
   * @param started this delivery's step_started event: `pending()` until a write carried it.
   */
  constructor(
    private readonly o: TextStreamOptions,
    private readonly ids: { delivery: string; deliveryKey: string; mayFollowAnother: boolean },
    private readonly started: { pending(): string; written(): void },
  ) {}

  /** The provider's callback: never throws, never waits. */
  readonly push = (text: string): void => {
    if (this.stopped || text.length === 0) return;
    this.buffer += text;
    if (this.buffer.length >= this.o.flushChars) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.o.flushMs);
  };

  /**
   * Ends the attempt once its writes are done. A completed answer (`complete`) writes what is
   * still buffered, so every piece precedes the step's decision event; a failed attempt drops it
   * (its text is void: the next attempt's first batch says so with step_restarted).
   */
  async end(complete: boolean): Promise<void> {
    if (complete) {
      this.flush();
      // An answer with no text (tool calls only) after another delivery or attempt: a marker write
      // still announces step_restarted if that other one had streamed text of this step.
      if (this.seq === 0 && !this.stopped && this.ids.mayFollowAnother) {
        this.seq++;
        this.chain = this.chain.then(() => this.write('', -1));
      }
    } else {
      this.drop();
    }
    await this.chain;
    this.stopped = true;
  }

  private drop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.buffer = '';
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length === 0 || this.stopped) return;
    const text = this.buffer;
    this.buffer = '';
    const seq = this.seq++;
    this.chain = this.chain.then(() => this.write(text, seq));
  }

  private async write(text: string, seq: number): Promise<void> {
    if (this.stopped) return;
    const { o } = this;
    const startedEvent = this.started.pending();
    try {
      const { restarted } = await appendTextDeltas(o.redis, o.keys, {
        token: o.token,
        step: o.step,
        jobId: o.jobId,
        deliveryKey: this.ids.deliveryKey,
        eventsMaxLen: o.eventsMaxLen,
        event: text === '' ? '' : JSON.stringify({ step: o.step, delivery: this.ids.delivery, seq, text }),
        startedEvent,
      });
      if (text === '' && !restarted) return; // the marker found nothing to announce, and wrote nothing
      this.started.written();
      if (text !== '') o.crash?.hit('mid_stream', o.step);
      o.metrics.textDeltaBatches.inc({ outcome: restarted ? 'restarted' : 'written' });
    } catch (err) {
      this.stopped = true;
      this.drop();
      if (err instanceof FenceError) {
        // Another owner has the step (or it ended): its writes, not ours, are the answer now.
        o.metrics.textDeltaBatches.inc({ outcome: 'fence_lost' });
        o.log.info(
          { code: 'text_stream_fenced', fence: err.code, delivery: this.ids.delivery },
          'streamed text stopped: the step is no longer ours',
        );
      } else {
        o.metrics.textDeltaBatches.inc({ outcome: 'write_failed' });
        o.log.warn(
          { code: 'text_stream_failed', delivery: this.ids.delivery, err },
          'streamed text stopped: write failed',
        );
      }
    }
  }
}
