/**
 * Summarizes a V8 .cpuprofile (no dependencies):
 *  - self time by package / project file;
 *  - "by project frame": each busy sample goes to the nearest frame of src/ or
 *    bench/ on its stack (library time is charged to the project code that
 *    called into it, e.g. ioredis encoding of the commit script's arguments to
 *    RedisStepStore.commit); samples with no project frame go to the library.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export function area(url: string): string {
  if (!url) return '(native/vm)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return url;
  const m = /\/(src|bench|test)\/(.*)$/.exec(url);
  return m ? `${m[1]}/${m[2]}` : url;
}

export const isProjectFrame = (url: string) =>
  /\/(src|bench)\//.test(url) && !url.includes('node_modules') && !url.includes('clientCounter');

/** `skipFraction`: ignore the first part of the profile (start-up, JIT warm-up). */
export function summarizeProfile(file: string, top = 30, skipFraction = 0): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  const span = p.timeDeltas.reduce((s, x) => s + x, 0);
  let clock = 0;
  for (let i = 0; i < p.samples.length; i++) {
    clock += p.timeDeltas[i] ?? 0;
    if (clock < span * skipFraction) continue;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  let total = 0;
  let idle = 0;
  const byArea = new Map<string, number>();
  const byFrame = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, t: number) => m.set(k, (m.get(k) ?? 0) + t);
  for (const [id, t] of self) {
    total += t;
    const leaf = byId.get(id)!;
    const fname = leaf.callFrame.functionName;
    if (fname === '(idle)') {
      idle += t;
      continue;
    }
    add(byArea, area(leaf.callFrame.url), t);
    if (fname === '(garbage collector)' || fname === '(program)') {
      add(byFrame, fname, t);
      continue;
    }
    let cur: number | undefined = id;
    let key: string | undefined;
    let firstLib: string | undefined;
    while (cur !== undefined) {
      const n = byId.get(cur)!;
      if (isProjectFrame(n.callFrame.url)) {
        key = `${n.callFrame.functionName || '(anonymous)'}  ${area(n.callFrame.url)}`;
        break;
      }
      if (!firstLib && n.callFrame.url.includes('node_modules'))
        firstLib = `${area(n.callFrame.url)}: ${n.callFrame.functionName || '(anonymous)'}`;
      cur = parent.get(cur);
    }
    add(byFrame, key ?? `[library only] ${firstLib ?? fname}`, t);
  }
  const busy = total - idle;
  const pct = (t: number) => `${((100 * t) / busy).toFixed(1).padStart(5)}%`;
  const lines = [
    `sampled ${(total / 1000).toFixed(0)} ms, busy ${(busy / 1000).toFixed(0)} ms (percentages are of busy time)`,
    '',
    'self time by package / file:',
  ];
  for (const [k, t] of [...byArea].sort((a, b) => b[1] - a[1]).slice(0, 20)) lines.push(`  ${pct(t)}  ${k}`);
  lines.push('', 'by nearest project frame (library time charged to the project code that called it):');
  for (const [k, t] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${k}`);
  return lines.join('\n');
}
