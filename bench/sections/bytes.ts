/**
 * Section "bytes": what a completed run leaves in Redis and what a step appends to the AOF, counted in bytes (no
 * timing: the figures repeat on a busy machine).
 *
 *  1. Memory per completed run, by key family: N built-in support-agent runs (5 steps, a ticket and an email
 *     through the ledger), and N runs of 20 read-only steps whose tool reads 1 KB of text each step; `MEMORY USAGE
 *     <key> SAMPLES 0` of every key after minus before, grouped by the key's family (src/store/keys.ts), / N.
 *  2. AOF bytes per read-only step: a plain BullMQ chain round and an engine round of the same size (the
 *     throughput section's workload), INFO aof_current_size delta / steps; and the AOF bytes per 20-step 1 KB run.
 *  3. The journal codec's choice (src/core/journal.ts): each candidate codec over every entry of the same runs'
 *     transcripts (their JSON), bytes kept and CPU per entry (CPU: process.cpuUsage over repeated passes, noisy on
 *     a shared machine; the ratios are exact).
 */
import { constants, brotliCompressSync, brotliDecompressSync, deflateRawSync, inflateRawSync } from 'node:zlib';
import * as zlib from 'node:zlib';
import { round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { createRun, readOnlyScript, runRound } from '../lib/workload.js';
import { unpackEntry } from '../../src/core/journal.js';
import { readJournal } from '../../src/store/runJournal.js';
import { aofBytesByFamily, aofMark } from '../lib/aofFamilies.js';
import type { WorkerPool } from '../lib/pool.js';
import { completeSupportRuns, keyCategory, measureKeys } from './memory.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const LONG_STEPS = 20;

/**
 * About 1 KB of a customer's prose, different per run (sentences picked from a fixed set by the run's index): what
 * the 20-step run's read tool returns each step. Prose, not random bytes: a codec's ratio on it is a real one.
 */
const SENTENCES = [
  'I ordered the large ceramic mug set three weeks ago and it finally arrived this morning.',
  'When I opened the box two of the four mugs were shattered and the handle of a third had come off.',
  'The outer carton looked fine, so I think the damage happened before it was packed.',
  'I have attached photos of the broken pieces and of the packing slip with the order number.',
  'This was meant to be a birthday present for my mother, so I am quite disappointed.',
  'Could you send a replacement set, or refund the two broken mugs and the shipping cost?',
  'I would prefer a replacement if it can arrive before the end of next week.',
  'Please let me know whether you need me to send the broken mugs back to you.',
  'I have been a customer for several years and this is the first time something like this happened.',
  'My phone number is on the account if it is easier to call me during the day.',
  'The tracking page still says the parcel is in transit, which is strange because I have it here.',
  'I also noticed that I was charged twice for the delivery on my card statement.',
];

export function proseOf(i: number, bytes = 1024): string {
  let out = '';
  for (let k = 0; out.length < bytes; k++) out += `${SENTENCES[(i * 7 + k * 5) % SENTENCES.length]} `;
  return out.slice(0, bytes);
}

async function completeLongRuns(env: BenchEnv, pool: WorkerPool, n: number, tag: string): Promise<string[]> {
  const ids = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      createRun(env.ctx, `${tag}-${i}`, readOnlyScript(LONG_STEPS), {
        maxSteps: LONG_STEPS + 10,
        body: proseOf(i),
      }),
    ),
  );
  await pool.prepare({ kind: 'engine', queueName: 'unused', recordLatency: false });
  await pool.go();
  try {
    await pool.waitFor(n * LONG_STEPS, 180_000);
  } finally {
    await pool.finish().catch(() => []);
  }
  const statuses = await Promise.all(ids.map((id) => env.ctx.redis.hget(env.ctx.keys.run(id).run, 'status')));
  const bad = statuses.filter((s) => s !== 'completed');
  if (bad.length) throw new Error(`${bad.length} of ${n} long runs did not complete (${[...new Set(bad)].join(', ')})`);
  return ids;
}

interface PerRun {
  /** The runs' journal entries (JSON), for the codec comparison. */
  transcripts: string[];
  total: number;
  byFamily: Record<string, { keys: number; bytes: number }>;
  aof: number;
  aofByFamily: Record<string, number>;
}

/** Keys and AOF bytes per run of `complete`'s `n` runs, from an empty Redis. */
async function perRun(env: BenchEnv, n: number, complete: () => Promise<unknown>): Promise<PerRun> {
  const { prefix, bullPrefix } = env.ctx.keys;
  await env.reset();
  const base = await measureKeys(env.admin, prefix, bullPrefix);
  await sleep(1200);
  const mark = await aofMark(env.admin);
  await complete();
  await sleep(1200); // appendfsync everysec: the last writes reach the file within a second
  const after = await measureKeys(env.admin, prefix, bullPrefix);
  const transcripts = await journalsOf(env);
  const aof = await aofBytesByFamily(env.admin, mark, (key) => keyCategory(key, prefix, bullPrefix));
  const byFamily: PerRun['byFamily'] = {};
  let total = 0;
  for (const [cat, a] of after.byCategory) {
    const b = base.byCategory.get(cat) ?? { keys: 0, bytes: 0 };
    const bytes = (a.bytes - b.bytes) / n;
    if (bytes === 0 && a.keys === b.keys) continue;
    byFamily[cat] = { keys: round((a.keys - b.keys) / n, 2), bytes: round(bytes, 0) };
    total += bytes;
  }
  const aofByFamily: Record<string, number> = {};
  let aofTotal = 0;
  for (const [fam, bytes] of aof) {
    aofByFamily[fam] = round(bytes / n, 0);
    aofTotal += bytes;
  }
  return { transcripts, total: round(total, 0), byFamily, aof: round(aofTotal / n, 0), aofByFamily };
}

/** Every journal entry in the bench Redis, as JSON: an ended run's journal is packed (src/store/runJournal.ts). */
async function journalsOf(env: BenchEnv): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await env.admin.scan(
      cursor,
      'MATCH',
      `${env.ctx.keys.prefix}:*:journal-packed`,
      'COUNT',
      1000,
    );
    cursor = next;
    for (const key of keys) {
      const k = { journal: key.slice(0, -'-packed'.length), journalPacked: key };
      for (const [i, raw] of (await readJournal(env.admin, k)).entries()) out.push(unpackEntry(raw, i));
    }
  } while (cursor !== '0');
  return out;
}

/** The preset dictionary's idea, rebuilt here so a candidate can be priced with and without one. */
const SCHEMA_DICTIONARY = Buffer.from(
  '{"v":1,"kind":"operator","step":1,"action":"approve","by":"","at":1,"detail":""}' +
    '{"v":1,"kind":"status","step":1,"status":"completed","reason":"final_answer"}' +
    '"usage":{"promptTokens":100,"completionTokens":10},"attempts":1}' +
    '{"v":1,"kind":"decision","step":1,"model":"","toolCalls":[{"id":"call_1_0","name":"","args":{}}],"final":"","text":"' +
    '{"v":1,"kind":"observation","step":1,"callId":"call_1_0","tool":"","status":"ok","output":{"',
);

type Codec = [(b: Buffer) => Buffer, (c: Buffer) => Buffer];
const zstd = zlib as unknown as {
  zstdCompressSync?: (b: Buffer, o?: object) => Buffer;
  zstdDecompressSync?: (b: Buffer, o?: object) => Buffer;
};
const brotli = (quality: number): Codec => [
  (b) =>
    brotliCompressSync(b, {
      params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: b.length },
    }),
  (c) => brotliDecompressSync(c),
];
const CODECS: Record<string, Codec> = {
  'deflate-raw 6': [(b) => deflateRawSync(b, { level: 6 }), (c) => inflateRawSync(c)],
  'deflate-raw 6 + schema dictionary (shipped, 4 KB window)': [
    (b) => deflateRawSync(b, { level: 6, windowBits: 12, memLevel: 4, dictionary: SCHEMA_DICTIONARY }),
    (c) => inflateRawSync(c, { dictionary: SCHEMA_DICTIONARY }),
  ],
  'brotli 4': brotli(4),
  'brotli 6': brotli(6),
  'brotli 11': brotli(11),
  ...(zstd.zstdCompressSync && zstd.zstdDecompressSync
    ? {
        'zstd 3': [(b: Buffer) => zstd.zstdCompressSync!(b), (c: Buffer) => zstd.zstdDecompressSync!(c)] as Codec,
      }
    : {}),
};

/** Bytes kept (whole transcripts, every entry compressed) and CPU µs per entry of each codec. */
function codecRows(corpora: Record<string, string[]>): (string | number)[][] {
  const rows: (string | number)[][] = [];
  for (const [name, [compress, inflate]] of Object.entries(CODECS)) {
    const row: (string | number)[] = [name];
    for (const entries of Object.values(corpora)) {
      const bufs = entries.map((e) => Buffer.from(e, 'utf8'));
      const raw = bufs.reduce((s, b) => s + b.length, 0);
      const packed = bufs.map(compress);
      const kept = packed.reduce((s, c) => s + c.length + 1, 0);
      const passes = Math.max(1, Math.ceil(2_000 / bufs.length));
      let t = process.cpuUsage();
      for (let p = 0; p < passes; p++) for (const b of bufs) compress(b);
      const c = process.cpuUsage(t);
      t = process.cpuUsage();
      for (let p = 0; p < passes; p++) for (const x of packed) inflate(x);
      const d = process.cpuUsage(t);
      const per = (u: NodeJS.CpuUsage) => round((u.user + u.system) / passes / bufs.length, 1);
      row.push(round(kept / raw, 3), per(c), per(d));
    }
    rows.push(row);
  }
  return rows;
}

function familyRows(a: PerRun, b: PerRun): (string | number)[][] {
  const fams = [...new Set([...Object.keys(a.byFamily), ...Object.keys(b.byFamily)])].sort(
    (x, y) => (b.byFamily[y]?.bytes ?? 0) - (b.byFamily[x]?.bytes ?? 0),
  );
  return [
    ...fams.map((f) => [
      f,
      a.byFamily[f]?.keys ?? 0,
      a.byFamily[f]?.bytes ?? 0,
      b.byFamily[f]?.keys ?? 0,
      b.byFamily[f]?.bytes ?? 0,
    ]),
    ['total', '', a.total, '', b.total],
  ];
}

function aofRows(a: PerRun, b: PerRun): (string | number)[][] {
  const fams = [...new Set([...Object.keys(a.aofByFamily), ...Object.keys(b.aofByFamily)])].sort(
    (x, y) => (b.aofByFamily[y] ?? 0) - (b.aofByFamily[x] ?? 0),
  );
  return [...fams.map((f) => [f, a.aofByFamily[f] ?? 0, b.aofByFamily[f] ?? 0]), ['total', a.aof, b.aof]];
}

export const bytes: Section = {
  name: 'bytes',
  title: 'Bytes: Redis memory per completed run by key family, AOF bytes per step against a plain BullMQ chain',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const nSupport = opts.quick ? 40 : 200;
    const nLong = opts.quick ? 20 : 100;
    const chain = opts.quick ? { chains: 20, steps: 20 } : { chains: 50, steps: 40 };
    const pool = await env.spawnPool(1);
    let support: PerRun;
    let long: PerRun;
    let plainAof: number;
    let engineAof: number;
    try {
      // Warm the worker (script cache) outside the measured runs.
      await runRound(env, pool, { kind: 'engine', chains: 5, steps: 5, tag: `bytesw${Date.now()}` });
      support = await perRun(env, nSupport, () => completeSupportRuns(env, pool, nSupport, `bytes${Date.now()}`));
      long = await perRun(env, nLong, () => completeLongRuns(env, pool, nLong, `bytesl${Date.now()}`));
      const tag = `bytesa${Date.now()}`;
      plainAof = (await runRound(env, pool, { kind: 'plain', ...chain, tag })).aofBytesPerStep;
      engineAof = (await runRound(env, pool, { kind: 'engine', ...chain, tag })).aofBytesPerStep;
    } finally {
      await pool.kill();
    }
    const corpora = { support: support.transcripts, [`${LONG_STEPS}x1KB`]: long.transcripts };
    const codecs = codecRows(corpora);
    const metrics: Metric[] = [
      atMost(
        'memory_per_support_run',
        `Redis memory per completed support run (${nSupport} runs, everything incl. BullMQ)`,
        support.total,
        'B',
        8 * 1024,
      ),
      atMost(
        'memory_per_long_run',
        `Redis memory per completed ${LONG_STEPS}-step run reading 1 KB a step (${nLong} runs)`,
        long.total,
        'B',
        22 * 1024,
      ),
      { key: 'aof_per_support_run', label: 'AOF bytes per completed support run', value: support.aof, unit: 'B' },
      {
        key: 'aof_per_long_run',
        label: `AOF bytes per completed ${LONG_STEPS}-step 1 KB run`,
        value: long.aof,
        unit: 'B',
        note: `${round(long.aof / LONG_STEPS, 0)} B a step`,
      },
      {
        key: 'aof_per_plain_step',
        label: 'AOF bytes per step, plain BullMQ chain',
        value: round(plainAof, 0),
        unit: 'B',
      },
      atMost(
        'aof_per_step_ratio',
        'AOF bytes per read-only step, engine / plain chain',
        round(engineAof / plainAof, 3),
        'x',
        1.5,
        `${round(engineAof, 0)} / ${round(plainAof, 0)} B, ${chain.chains} chains x ${chain.steps} steps`,
      ),
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title: `Redis memory per completed run by key family (MEMORY USAGE <key> SAMPLES 0 of every key, after minus before, / runs)`,
          header: [
            'family',
            'support keys/run',
            'support B/run',
            `${LONG_STEPS}x1KB keys/run`,
            `${LONG_STEPS}x1KB B/run`,
          ],
          rows: familyRows(support, long),
        },
        {
          title:
            'AOF bytes per completed run by key family (the incremental AOF, parsed; scripts persist as their effects)',
          header: ['family', 'support B/run', `${LONG_STEPS}x1KB B/run`],
          rows: aofRows(support, long),
        },
        {
          title: `Journal codecs over every entry of these runs (${support.transcripts.length} support, ${long.transcripts.length} ${LONG_STEPS}x1KB entries, each compressed on its own; kept = stored bytes incl. the marker / JSON bytes; µs = CPU per entry)`,
          header: [
            'codec',
            'support kept',
            'compress µs',
            'inflate µs',
            `${LONG_STEPS}x1KB kept`,
            'compress µs',
            'inflate µs',
          ],
          rows: codecs,
        },
      ],
      details: {
        support: { ...support, transcripts: undefined },
        long: { ...long, transcripts: undefined },
        codecs,
        plainAofPerStep: plainAof,
        engineAofPerStep: engineAof,
        runs: { nSupport, nLong },
      },
    };
  },
};
