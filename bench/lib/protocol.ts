/** Messages between the bench (parent) and its worker child processes (bench/workerProcess.ts), over Node IPC. */

export type WorkKind = 'plain' | 'engine';

export interface PrepareSpec {
  kind: WorkKind;
  /** Plain chain queue name (engine uses its shard queues). */
  queueName: string;
  /** Record per-job latency (BullMQ 'active' -> 'completed', in ms) and completion times. */
  recordLatency: boolean;
}

export type ParentMessage =
  | { id: number; cmd: 'prepare'; spec: PrepareSpec }
  | { id: number; cmd: 'go' }
  | { id: number; cmd: 'finish' }
  | { id: number; cmd: 'exit' };

export interface ChildRoundStats {
  pid: number;
  /**
   * `worker`: runs the round's steps; `compactor`: the reconciler's compactor (src/runs/compactor.ts), which packs the
   * runs the round ends, as a fleet's reconciler does beside its workers.
   */
  role: 'worker' | 'compactor';
  completed: number;
  failed: number;
  failures: string[];
  /** Epoch ms (sub-ms precision) of go, first 'active' and last 'completed' (the compactor's: its last run packed). */
  goAt: number;
  firstActiveAt: number;
  lastAt: number;
  /** CPU of this process from go to the first 20 ms progress tick after its last completion (user + system). */
  cpuUs: number;
  /**
   * Of it, the main thread's (process.threadCpuUsage, same span): cpuUs also counts V8's helper threads and libuv's
   * pool, which run beside the main thread; the main thread alone bounds a process's steps a second.
   */
  mainUs: number;
  /** Redis commands this process sent from go to its last completion. */
  commandsSent: number;
  /** Per command name, from go to finish (includes the short idle tail). */
  byCommand: Record<string, number>;
  latencies?: number[];
  completedAt?: number[];
}

export type ChildMessage =
  | { type: 'hello'; pid: number }
  | { type: 'reply'; id: number; ok: true; result?: unknown }
  | { type: 'reply'; id: number; ok: false; error: string }
  | { type: 'progress'; completed: number; failed: number; lastAt: number };
