/** Summarizes a V8 .cpuprofile: self time by function and by package/file (no dependencies). */
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

function area(url: string): string {
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

/** `skipFraction`: ignore the first part of the profile (start-up, JIT warm-up). */
export function summarizeProfile(file: string, top = 30, skipFraction = 0): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const span = p.timeDeltas.reduce((s, x) => s + x, 0);
  let clock = 0;
  for (let i = 0; i < p.samples.length; i++) {
    clock += p.timeDeltas[i] ?? 0;
    if (clock < span * skipFraction) continue;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((s, x) => s + x, 0);
  const fn = new Map<string, number>();
  const ar = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    const a = area(n.callFrame.url);
    const key = `${n.callFrame.functionName || '(anonymous)'}  ${a}:${n.callFrame.lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + t);
    ar.set(a, (ar.get(a) ?? 0) + t);
  }
  const pct = (t: number) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  const lines = [`total sampled ${(total / 1000).toFixed(0)} ms`, '', 'self time by package/file:'];
  for (const [k, t] of [...ar].sort((a, b) => b[1] - a[1]).slice(0, 25)) lines.push(`  ${pct(t)}  ${k}`);
  lines.push('', 'self time by function:');
  for (const [k, t] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(t)}  ${k}`);
  return lines.join('\n');
}
