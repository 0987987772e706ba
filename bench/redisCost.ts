/**
 * `node dist/bench/redisCost.js [--chains=50] [--steps=40] [--ablate=journal,budget,events,index,cost,journal+budget]
 * [--variant=<script>=<file.lua> ...] [--flow[=N]] [--env=NAME=value ...] [--by-command] [--cpu-rounds=0]
 * [--keep=<dir>]` (after `npm run build`; needs valgrind): what a read-only step costs the Redis server, exactly.
 *
 * Runs one plain BullMQ chain round and one engine round (read-only steps, one worker process, as the throughput
 * section does) while recording every command the server executes (MONITOR), then replays each round into a fresh
 * redis-server under callgrind and prints the instructions the server executed per step in the measured part of
 * the round. Instruction counts do not move with the machine's load, so two figures differ only when the work
 * does: a change to a script is priced by `--variant`, which replays the engine's round with that script's body
 * taken from the file (its `-- @include` lines resolved as the engine's are) instead of the shipped one, and each
 * of the commit's writes by `--ablate`, which replays it with the commit minus that write (lib/commitAblations.ts;
 * `cost` also leaves out the calls of the money counters' own scripts: the step without money accounting).
 * `--env=NAME=value` sets a setting of the traced worker processes (`--env=TENANT_DAILY_COST=1000000000000`: a money
 * limit in force); `--by-command` prints the engine round's requests per step, by command and script.
 * `--flow[=N]` prices flow control: N pairs of engine rounds (default 1), one with `FLOW_CONTROL=false` and one with
 * no flow setting (on, the default limits, none of which holds a run back), their order alternating, each run
 * created through the producer's intake as a deployment's are (so with flow control on, into its tenant's line and
 * admitted at once); creation is outside the measured part, the runs' ends (slot released) inside.
 * `--cpu-rounds=N` also replays each case N times natively, alternating, for the server's CPU µs per step (INFO
 * cpu; noisy on a shared machine). `--keep` keeps the callgrind files (callgrind_annotate shows where the
 * instructions go, function by function).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createBenchEnv } from './lib/env.js';
import { runRound, ticket, type RoundSpec } from './lib/workload.js';
import { median } from './lib/stats.js';
import { captureCommands } from './lib/monitorTrace.js';
import { replay, scriptBodies, sha1, splitRounds, startReplayServer, type TracedRound } from './lib/replayTrace.js';
import { ablatedCommit, ablatedDrops } from './lib/commitAblations.js';
import { flag } from './lib/args.js';
import { flowContext } from './lib/flowFleet.js';
import { startRun } from '../src/producer/intake.js';
import { library, resolveIncludes, scriptDefs } from '../src/store/luaScripts.js';
import { buildLibrary, LIBRARY_SCRIPTS } from '../src/store/luaLibrary.js';

const chains = Number(flag('chains', '50'));
const steps = Number(flag('steps', '40'));
const cpuRounds = Number(flag('cpu-rounds', '0'));
const keep = flag('keep', '');
if (keep) mkdirSync(keep, { recursive: true });
const ablations = flag('ablate', '').split(',').filter(Boolean);
const variantFlags = process.argv.filter((a) => a.startsWith('--variant=')).map((a) => a.slice('--variant='.length));
const workerEnv = Object.fromEntries(
  process.argv
    .filter((a) => a.startsWith('--env='))
    .map((a) => {
      const [k, ...v] = a.slice('--env='.length).split('=');
      if (!k || v.length === 0) throw new Error(`${a}: expected --env=NAME=value`);
      return [k, v.join('=')];
    }),
);
const byCommand = process.argv.includes('--by-command');
const flowArg = process.argv.find((a) => a === '--flow' || a.startsWith('--flow='));
const flowPairs = flowArg === undefined ? 0 : Math.max(1, Number(flowArg.split('=')[1] ?? '1') | 0);
/** The flow ablation's two fleets: only what each changes; flow control on is the default. */
const FLOW_MODES = { off: { FLOW_CONTROL: 'false' }, on: {} } as const;
type FlowMode = keyof typeof FLOW_MODES;
type RoundCreate = NonNullable<RoundSpec['create']>;

interface Case {
  label: string;
  round: TracedRound;
  swap: Map<string, string>;
  /** Scripts (shas or library function names) whose calls this case leaves out. */
  drop?: Set<string>;
  bodies: string[];
}

interface Traced {
  plain: TracedRound;
  engine: TracedRound;
  /** The flow ablation's rounds, in the order they ran. */
  flow: { mode: FlowMode; pair: number; round: TracedRound }[];
  bodies: Map<string, Buffer>;
}

async function trace(): Promise<Traced> {
  const env = await createBenchEnv({ quick: false, rounds: 1 });
  try {
    const pool = await env.spawnPool(1, workerEnv);
    const flowPools = flowPairs > 0 ? await flowFleets(env) : undefined;
    const capture = await captureCommands(env.redis.port);
    for (const kind of ['plain', 'engine'] as const) {
      const r = await runRound(env, pool, { kind, chains, steps, tag: 'trace' });
      // The traced round as the server counted it (INFO; MONITOR's own cost is in neither figure).
      console.log(
        `traced ${kind} round: ${r.clientCmdsPerStep.toFixed(2)} requests, ${r.redisCallsPerStep.toFixed(1)} ` +
          `commands executed (inside scripts too), ${Math.round(r.aofBytesPerStep)} AOF bytes per step`,
      );
    }
    const order: { mode: FlowMode; pair: number }[] = [];
    for (let pair = 0; pair < flowPairs; pair++)
      for (const mode of pair % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const { pool: p, create } = flowPools![mode];
        await runRound(env, p, { kind: 'engine', chains, steps, tag: `flow${mode}${pair}`, create });
        order.push({ mode, pair });
      }
    const commands = await capture.stop();
    await pool.kill();
    if (flowPools) await Promise.all(Object.values(flowPools).map((f) => f.pool.kill()));
    const rounds = splitRounds(commands);
    if (rounds.length !== 2 + order.length)
      throw new Error(`expected ${2 + order.length} traced rounds, found ${rounds.length}`);
    return {
      plain: rounds[0]!,
      engine: rounds[1]!,
      flow: order.map((o, i) => ({ ...o, round: rounds[2 + i]! })),
      bodies: scriptBodies(commands),
    };
  } finally {
    await env.cleanup();
  }
}

/** A one-process worker pool per flow mode, and runs created through the intake with that mode's settings. */
async function flowFleets(env: Awaited<ReturnType<typeof createBenchEnv>>) {
  const fleets = {} as Record<FlowMode, { pool: Awaited<ReturnType<typeof env.spawnPool>>; create: RoundCreate }>;
  for (const mode of Object.keys(FLOW_MODES) as FlowMode[]) {
    const ctx = await flowContext(env, `rediscost-flow-${mode}`, FLOW_MODES[mode]);
    const create: RoundCreate = async (id, script, maxSteps) =>
      (
        await startRun(
          ctx,
          { tenant: 'bench', ticket: ticket(id), budget: { maxSteps }, agent: { model: 'scripted', script } },
          `k-${id}`,
        )
      ).runId;
    fleets[mode] = { pool: await env.spawnPool(1, { ...workerEnv, ...FLOW_MODES[mode] }), create };
  }
  return fleets;
}

/**
 * The engine's round with `script` replaced by `source` (its file's text, `-- @include` lines and all). A library
 * script's variant is a library of its own, loaded beside the shipped one; a script's is its resolved body.
 */
function swapCase(label: string, script: string, source: string, engine: TracedRound): Case {
  const shipped = scriptDefs().find((d) => d.name === script);
  if (!shipped) throw new Error(`${label}: no script ${script} in src/store/lua`);
  let from: string;
  let to: string;
  let body: string;
  if (LIBRARY_SCRIPTS.has(script)) {
    const variant = buildLibrary(new Map([[script, source]]));
    [from, to, body] = [library().functions.get(script)!, variant.functions.get(script)!, variant.code];
  } else {
    body = resolveIncludes(source);
    [from, to] = [sha1(shipped.lua), sha1(body)];
  }
  const calls = (c: TracedRound['window'][number]) =>
    c.args[1] && (c.args[1].toString() === from || sha1(c.args[1]) === from);
  if (!engine.prefix.some(calls) && !engine.window.some(calls))
    throw new Error(`${label}: the engine's round never calls ${script}`);
  return { label, round: engine, swap: new Map([[from, to]]), bodies: [body] };
}

function variantCase(spec: string, engine: TracedRound): Case {
  const eq = spec.indexOf('=');
  if (eq < 0) throw new Error(`--variant=${spec}: expected <script>=<file.lua>`);
  const [script, file] = [spec.slice(0, eq), spec.slice(eq + 1)];
  return swapCase(`${script}=${basename(file)}`, script, readFileSync(file, 'utf8'), engine);
}

async function measure(c: Case, bodies: Map<string, Buffer>, callgrind: boolean, index: number) {
  const outFile = keep && callgrind ? join(keep, `callgrind.${index}.${c.label.replace(/[^\w.=-]/g, '_')}`) : undefined;
  const server = await startReplayServer({ callgrind, ...(outFile ? { outFile } : {}) });
  try {
    await server.load([...bodies.values(), library().code, ...c.bodies]);
    await replay(server.client, c.round.prefix, c.swap, c.drop);
    const cpu0 = await server.cpuSeconds();
    await server.count(true);
    const result = await replay(server.client, c.round.window, c.swap, c.drop);
    await server.count(false);
    const cpuUs = ((await server.cpuSeconds()) - cpu0) * 1e6;
    return { result, cpuUs, instructions: await server.stop() };
  } catch (e) {
    await server.stop().catch(() => undefined);
    throw e;
  }
}

/** How the replay names a script's calls: its library function, or the sha of its resolved body. */
function callName(script: string): string {
  const shipped = scriptDefs().find((d) => d.name === script);
  if (!shipped) throw new Error(`no script ${script} in src/store/lua`);
  return LIBRARY_SCRIPTS.has(script) ? library().functions.get(script)! : sha1(shipped.lua);
}

/** The engine round's requests per step, by command (a script's call by the script's name). */
function printByCommand(round: TracedRound, perStep: number): void {
  const names = new Map<string, string>();
  for (const d of scriptDefs()) names.set(callName(d.name), d.name);
  const counts = new Map<string, number>();
  for (const c of round.window) {
    let n = c.args[0]!.toString('latin1').toUpperCase();
    if (n === 'EVAL' || n === 'EVALSHA' || n === 'FCALL') {
      const id = n === 'EVAL' ? sha1(c.args[1]!) : c.args[1]!.toString();
      n = `${n === 'FCALL' ? 'FCALL' : 'EVALSHA'} ${names.get(id) ?? `${id.slice(0, 12)} (BullMQ)`}`;
    }
    counts.set(n, (counts.get(n) ?? 0) + 1);
  }
  console.log('engine round, requests per step by command (the trace, blocking reads included):');
  for (const [n, k] of [...counts].sort((a, b) => b[1] - a[1]))
    console.log(`  ${(k / perStep).toFixed(3).padStart(7)}  ${n}`);
}

// An unknown or stale ablation fails first.
const ablated = ablations.map((a) => [a, ablatedCommit(a), ablatedDrops(a)] as const);
const { plain, engine, flow, bodies } = await trace();
const cases: Case[] = [
  { label: 'plain', round: plain, swap: new Map(), bodies: [] },
  { label: 'engine', round: engine, swap: new Map(), bodies: [] },
  ...ablated.map(([a, body, drops]) => ({
    ...swapCase(`commit without ${a}`, 'commitStep', body, engine),
    drop: new Set(drops.map(callName)),
  })),
  ...variantFlags.map((v) => variantCase(v, engine)),
  ...flow.map((f) => ({
    label: `engine, intake, flow ${f.mode === 'on' ? 'on (default)' : 'off'} #${f.pair + 1}`,
    round: f.round,
    swap: new Map<string, string>(),
    bodies: [],
  })),
];
const perStep = chains * steps;
if (Object.keys(workerEnv).length > 0)
  console.log(
    `worker settings: ${Object.entries(workerEnv)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
if (byCommand) printByCommand(engine, perStep);
console.log(`${chains} chains x ${steps} read-only steps; Redis instructions per step (callgrind), replayed:`);
const irs: number[] = [];
let refusedByEngine = 0;
for (const [i, c] of cases.entries()) {
  const { result, instructions } = await measure(c, bodies, true, i);
  const ir = instructions! / perStep;
  irs.push(ir);
  const vs =
    i === 0 ? '' : `  x${(ir / irs[0]!).toFixed(3)} plain${i > 1 ? `, x${(ir / irs[1]!).toFixed(3)} engine` : ''}`;
  console.log(
    `  ${c.label.padEnd(32)} ${Math.round(ir).toLocaleString('en-US').padStart(9)} instr/step${vs}` +
      `  (${(result.sent / perStep).toFixed(1)} commands/step, errors ${result.errors}, refused ${result.refused})`,
  );
  for (const err of result.firstErrors) console.log(`      ${err}`);
  // A replay is faithful when its scripts refuse what the round's did; a variant that refuses more measured less work.
  if (i > 1 && result.refused !== refusedByEngine)
    console.log(`      NOT COMPARABLE: ${result.refused} refused calls against the engine's ${refusedByEngine}`);
  if (i === 1) refusedByEngine = result.refused;
}
if (flow.length > 0) {
  // Each pair's rounds ran next to each other; the ratio is the pair's, the figure the pairs' median.
  const irOf = (mode: FlowMode, pair: number) =>
    irs[cases.length - flow.length + flow.findIndex((f) => f.mode === mode && f.pair === pair)]!;
  const ratios = Array.from({ length: flowPairs }, (_, pair) => irOf('on', pair) / irOf('off', pair));
  console.log(
    `flow control on (default) / off, Redis instructions per step: ${ratios.map((r) => r.toFixed(3)).join(', ')}` +
      ` (median x${median(ratios).toFixed(3)} over ${flowPairs} pair${flowPairs > 1 ? 's' : ''})`,
  );
}
if (cpuRounds > 0) {
  const cpu = cases.map(() => [] as number[]);
  for (let r = 0; r < cpuRounds; r++)
    for (const [i, c] of cases.entries()) cpu[i]!.push((await measure(c, bodies, false, i)).cpuUs / perStep);
  console.log(`Redis CPU µs per step, replayed natively, median of ${cpuRounds} alternating rounds:`);
  for (const [i, c] of cases.entries()) {
    const ratio = median(cpu[i]!.map((v, r) => v / cpu[0]![r]!));
    console.log(
      `  ${c.label.padEnd(32)} ${median(cpu[i]!).toFixed(1).padStart(7)} µs  x${ratio.toFixed(3)} plain (paired)`,
    );
  }
}
if (keep) console.log(`callgrind files in ${keep} (callgrind_annotate <file>)`);
