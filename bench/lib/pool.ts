/**
 * A pool of bench worker child processes (bench/workerProcess.ts), spawned the way the bench runs (compiled from
 * dist/ by `npm run bench`, through tsx when started from the sources) with an IPC channel. The bench
 * drives rounds through it: prepare -> go -> waitFor(jobs) -> finish.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { moduleArgs } from '../../testkit/spawnModule.js';
import type { ChildMessage, ChildRoundStats, ParentMessage, PrepareSpec } from './protocol.js';
import { nowMs } from './stats.js';

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** Distributes Omit over a union (keeps the discriminant). */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

class Child {
  readonly pending = new Map<number, Pending>();
  completed = 0;
  failed = 0;
  lastAt = 0;
  exited = false;
  onProgress?: () => void;
  private nextId = 1;
  readonly ready: Promise<number>;

  constructor(
    readonly proc: ChildProcess,
    readonly index: number,
  ) {
    let hello!: (pid: number) => void;
    let fail!: (e: Error) => void;
    this.ready = new Promise<number>((res, rej) => {
      hello = res;
      fail = rej;
    });
    proc.on('message', (m: ChildMessage) => {
      if (m.type === 'hello') hello(m.pid);
      else if (m.type === 'progress') {
        this.completed = m.completed;
        this.failed = m.failed;
        this.lastAt = m.lastAt;
        this.onProgress?.();
      } else if (m.type === 'reply') {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (m.ok) p.resolve(m.result);
        else p.reject(new Error(`worker child ${index}: ${m.error}`));
      }
    });
    proc.on('exit', (code, signal) => {
      this.exited = true;
      const err = new Error(`worker child ${index} (pid ${proc.pid}) exited (code ${code}, signal ${signal})`);
      fail(err);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.onProgress?.();
    });
  }

  request<T>(msg: WithoutId<ParentMessage>): Promise<T> {
    if (this.exited) return Promise.reject(new Error(`worker child ${this.index} has exited`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.proc.send({ ...msg, id });
    });
  }
}

export interface PoolOptions {
  env: Record<string, string>;
  /** Extra node flags for the children (e.g. --cpu-prof). */
  execArgv?: string[];
  /** One more child running the reconciler's compactor, as a fleet runs one beside its workers (default true). */
  compactor?: boolean;
}

export class WorkerPool {
  private readonly children: Child[];
  goAt = 0;

  /** The workers, then the compactor's child when there is one (it completes no job). */
  private readonly all: Child[];

  private constructor(children: Child[], compactor: Child | undefined) {
    this.children = children;
    this.all = compactor ? [...children, compactor] : children;
  }

  static async start(n: number, opts: PoolOptions): Promise<WorkerPool> {
    const spawnChild = (i: number, env: Record<string, string>) =>
      new Child(
        spawn(process.execPath, moduleArgs('bench/workerProcess', opts.execArgv), {
          env,
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        }),
        i,
      );
    const children: Child[] = [];
    for (let i = 0; i < n; i++) children.push(spawnChild(i, opts.env));
    const compactor = opts.compactor === false ? undefined : spawnChild(n, { ...opts.env, BENCH_ROLE: 'compactor' });
    const pool = new WorkerPool(children, compactor);
    try {
      await Promise.all(pool.all.map((c) => c.ready));
    } catch (e) {
      await pool.kill();
      throw e;
    }
    return pool;
  }

  get size(): number {
    return this.children.length;
  }

  pids(): number[] {
    return this.children.map((c) => c.proc.pid ?? 0);
  }

  async prepare(spec: PrepareSpec): Promise<void> {
    for (const c of this.all) {
      c.completed = 0;
      c.failed = 0;
      c.lastAt = 0;
    }
    await Promise.all(this.all.map((c) => c.request({ cmd: 'prepare', spec })));
  }

  async go(): Promise<void> {
    this.goAt = nowMs();
    await Promise.all(this.all.map((c) => c.request({ cmd: 'go' })));
  }

  /** Resolves when the children together completed `jobs` jobs; returns the epoch ms of the last completion. */
  waitFor(jobs: number, timeoutMs: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const check = () => {
        const dead = this.all.find((c) => c.exited);
        const done = this.children.reduce((s, c) => s + c.completed, 0);
        const failed = this.children.reduce((s, c) => s + c.failed, 0);
        if (dead || done >= jobs || Date.now() > deadline) {
          clearInterval(timer);
          for (const c of this.children) c.onProgress = undefined;
          if (dead) reject(new Error(`worker child ${dead.index} exited during the round`));
          else if (done >= jobs) resolve(Math.max(...this.children.map((c) => c.lastAt)));
          else
            reject(
              new Error(`round timed out after ${timeoutMs} ms: ${done} of ${jobs} jobs completed, ${failed} failed`),
            );
        }
      };
      const deadline = Date.now() + timeoutMs;
      const timer = setInterval(check, 50);
      for (const c of this.children) c.onProgress = check;
      check();
    });
  }

  /** The round's stats of every child; the compactor's once it has packed every run the round ended. */
  finish(): Promise<ChildRoundStats[]> {
    return Promise.all(this.all.map((c) => c.request<ChildRoundStats>({ cmd: 'finish' })));
  }

  /** Asks the children to exit; SIGKILLs any still alive after `graceMs`. */
  async kill(graceMs = 5000): Promise<void> {
    await Promise.all(
      this.all.map(async (c) => {
        if (c.exited) return;
        const exited = new Promise<void>((r) => c.proc.once('exit', () => r()));
        try {
          if (c.proc.connected) c.proc.send({ id: 0, cmd: 'exit' } satisfies ParentMessage);
        } catch {
          // channel already closed
        }
        const t = setTimeout(() => c.proc.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(t);
      }),
    );
  }
}
