/**
 * Allocation sampling in a bench worker child and summaries of what it sampled (no dependencies).
 *
 * The child samples with the inspector's `HeapProfiler.startSampling`, counting objects that a minor or major GC
 * has already collected too: a step's garbage is what costs the worker GC time, and a plain sampling profile keeps
 * only the objects still alive when it is read. V8 scales every node's `selfSize` from its samples to an estimate of
 * all bytes allocated there, so the sum over the tree divided by the steps the sampled rounds completed is bytes
 * allocated per step.
 *
 * Summaries, like bench/lib/cpuprof.ts for CPU: bytes per step by function (the allocating frame) and by nearest
 * project frame (an allocation inside ioredis or BullMQ is charged to the src/ or bench/ code that called it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Session } from 'node:inspector/promises';
import { area, isProjectFrame } from './cpuprof.js';

/** The child's environment variable naming the directory its allocation profiles go to (one file per round). */
export const ALLOC_PROFILE_ENV = 'BENCH_ALLOC_PROFILE_DIR';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}

/** One round's file: the sampling profile and the steps the worker completed while it sampled. */
export interface AllocRound {
  kind: string;
  steps: number;
  profile: { head: HeapNode };
}

/** Samples one round at a time in this process; `stop` writes the round's file into `dir`. */
export class AllocSampler {
  private readonly session = new Session();
  private rounds = 0;

  constructor(private readonly dir: string) {
    this.session.connect();
  }

  async start(): Promise<void> {
    await this.session.post('HeapProfiler.startSampling', {
      // 32 KB is V8's default; 8 KB gives a few samples for every step-sized allocator over a round of 4,000 steps.
      samplingInterval: 8192,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }

  async stop(kind: string, steps: number): Promise<void> {
    const { profile } = await this.session.post('HeapProfiler.stopSampling');
    const round: AllocRound = { kind, steps, profile };
    const n = String(this.rounds++).padStart(3, '0');
    writeFileSync(join(this.dir, `alloc-${process.pid}-${n}-${kind}.json`), JSON.stringify(round));
  }
}

/** Bytes per step over the given rounds: by allocating function, by package / file, by nearest project frame. */
export function summarizeAllocations(files: string[], top = 30): string {
  let steps = 0;
  let total = 0;
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  const byFrame = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, b: number) => m.set(k, (m.get(k) ?? 0) + b);
  // An anonymous function is told apart by its line (1-based, as an editor shows it).
  const label = (f: CallFrame) => `${f.functionName || `(anonymous):${f.lineNumber + 1}`}  ${area(f.url)}`;
  for (const file of files) {
    const round = JSON.parse(readFileSync(file, 'utf8')) as AllocRound;
    steps += round.steps;
    // Depth first with the nearest project frame above each node carried down.
    const stack: { node: HeapNode; project: string | undefined; firstLib: string | undefined }[] = [
      { node: round.profile.head, project: undefined, firstLib: undefined },
    ];
    while (stack.length > 0) {
      const { node, project: above, firstLib: libAbove } = stack.pop()!;
      const f = node.callFrame;
      const project = isProjectFrame(f.url) ? label(f) : above;
      const firstLib = above === undefined && !libAbove && f.url.includes('node_modules') ? label(f) : libAbove;
      if (node.selfSize > 0) {
        total += node.selfSize;
        add(byFunction, label(f), node.selfSize);
        add(byArea, area(f.url), node.selfSize);
        add(byFrame, project ?? `[library only] ${firstLib ?? f.functionName}`, node.selfSize);
      }
      for (const c of node.children) stack.push({ node: c, project, firstLib });
    }
  }
  const perStep = (b: number) => `${(b / Math.max(steps, 1) / 1024).toFixed(2).padStart(7)} KB`;
  const lines = [
    `${files.length} round(s), ${steps} steps, ${perStep(total).trim()} allocated per step (sampled, scaled by V8)`,
    '',
    'per step by package / file:',
  ];
  const list = (m: Map<string, number>, n: number) => {
    for (const [k, b] of [...m].sort((x, y) => y[1] - x[1]).slice(0, n)) lines.push(`  ${perStep(b)}  ${k}`);
  };
  list(byArea, 20);
  lines.push('', 'per step by allocating function:');
  list(byFunction, top);
  lines.push('', 'per step by nearest project frame (library allocations charged to the project code that called it):');
  list(byFrame, top);
  return lines.join('\n');
}
