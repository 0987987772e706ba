/**
 * `npx tsx bench/intakeCompare.ts <other tree> [--cycles=12] [--burst=500] [--bodies=ticket,zendesk]`
 *
 * The intake section's bodies (bench/sections/intake.ts) sent to two API processes at once: this tree's and another
 * checkout's (a worktree of main, say), both on the bench's own Redis, no workers. Short bursts of each body go to
 * one API then the other, the order flipping every cycle, so both meet the same load on a shared machine; each
 * burst's CPU per create is the API process's utime + stime from /proc. Printed per body: each tree's median and
 * minimum CPU per create over the cycles and the median of the paired ratios (this tree / the other): the figure
 * that survives a loaded machine, where a round's CPU per create moves by half between rounds.
 */
import { Agent } from 'node:http';
import { resolve } from 'node:path';
import { createBenchEnv } from './lib/env.js';
import { median, round } from './lib/stats.js';
import { PRODUCER_TOKEN } from '../testkit/harness.js';
import { spawnApi as spawnOwnApi } from '../testkit/processes.js';
import { INTAKE_BODIES, load, TENANT, WEBHOOK_SECRET } from './sections/intake.js';
import { cpuSeconds } from './lib/processCpu.js';

const args = process.argv.slice(2);
const other = args.find((a) => !a.startsWith('--'));
const option = (name: string, fallback: string) =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
if (!other) {
  console.error('usage: npx tsx bench/intakeCompare.ts <other tree> [--cycles=12] [--burst=500] [--bodies=a,b]');
  process.exit(2);
}
const cycles = Number(option('cycles', '12'));
const burst = Number(option('burst', '500'));
const names = option('bodies', INTAKE_BODIES.map((b) => b.name).join(',')).split(',');
const bodies = INTAKE_BODIES.filter((b) => names.includes(b.name));

const env = await createBenchEnv({ quick: false, rounds: 1 });
try {
  // The other tree's API is started by its own testkit, so it runs that tree's sources.
  const { spawnApi: spawnOtherApi } = (await import(resolve(other, 'testkit/processes.ts'))) as {
    spawnApi: typeof spawnOwnApi;
  };
  const apiEnv = { ...env.appEnv, PRODUCER_TOKEN, WEBHOOK_SECRETS: JSON.stringify({ [TENANT]: WEBHOOK_SECRET }) };
  const apis = [];
  for (const [tree, spawn] of [
    ['this', spawnOwnApi],
    ['other', spawnOtherApi],
  ] as const) {
    const proc = await spawn(apiEnv, { keep: 'lifecycle' });
    env.onCleanup(async () => {
      if (proc.child.exitCode === null) {
        proc.child.kill('SIGTERM');
        await proc.exited;
      }
    });
    const api = { tree, proc, pid: proc.child.pid!, url: new URL(proc.url), agent: new Agent({ keepAlive: true }) };
    env.onCleanup(() => api.agent.destroy());
    apis.push(api);
  }
  for (const api of apis)
    for (const body of bodies) await load(api.url, api.agent, body, 1000, 10, `warm-${api.tree}-${body.name}`);
  const ms = new Map(bodies.map((b) => [b.name, { this: [] as number[], other: [] as number[] }]));
  for (let c = 0; c < cycles; c++) {
    await env.reset();
    for (const body of bodies) {
      for (const api of c % 2 === 0 ? apis : [...apis].reverse()) {
        // Fresh connections for each burst: a socket left idle while the other API's burst ran may be closed by the
        // server's keep-alive timeout just as it is used again (ECONNRESET on a loaded machine).
        api.agent.destroy();
        api.agent = new Agent({ keepAlive: true, maxSockets: 64 });
        const cpu0 = cpuSeconds(api.pid);
        const { statuses } = await load(api.url, api.agent, body, burst, 50, `c${c}-${api.tree}-${body.name}`).catch(
          (err: unknown) => {
            // Which API failed, and whether it is still alive, with its last lines (start, errors, exit).
            const state = api.proc.dead ? 'exited' : 'alive';
            throw new Error(`${api.tree} API (${state}): ${String(err)}\n${api.proc.lines.slice(-5).join('\n')}`);
          },
        );
        if (statuses['201'] !== burst) throw new Error(`${api.tree} ${body.name}: ${JSON.stringify(statuses)}`);
        ms.get(body.name)![api.tree].push(((cpuSeconds(api.pid) - cpu0) * 1000) / burst);
      }
    }
    console.error(`cycle ${c + 1} of ${cycles}: ${JSON.stringify(Object.fromEntries(ms))}`);
  }
  const rows = bodies.map((b) => {
    const m = ms.get(b.name)!;
    const ratios = m.this.map((x, i) => x / m.other[i]!);
    return {
      body: b.name,
      thisMedianMs: round(median(m.this), 3),
      thisMinMs: round(Math.min(...m.this), 3),
      otherMedianMs: round(median(m.other), 3),
      otherMinMs: round(Math.min(...m.other), 3),
      ratio: round(median(ratios), 3),
      ratioRange: [round(Math.min(...ratios), 2), round(Math.max(...ratios), 2)],
    };
  });
  console.log(`API CPU ms per create, ${cycles} cycles of ${burst} per body and tree; this tree vs ${other}`);
  for (const r of rows)
    console.log(
      `${r.body.padEnd(10)} this ${r.thisMedianMs} (min ${r.thisMinMs})  other ${r.otherMedianMs} (min ${r.otherMinMs})  this/other ${r.ratio} (${r.ratioRange.join('-')})`,
    );
  console.log(JSON.stringify({ cycles, burst, other, rows, perBurstMs: Object.fromEntries(ms) }));
} finally {
  await env.cleanup();
}
