/**
 * Every entry point refuses a Node the package does not support (package.json `engines.node`), in one line naming
 * the versions it supports, before it starts anything: an older Node fails later in ways that name something else
 * (a missing API, a loader error). The range language is the part engines uses here: `^X.Y.Z`, `>=X.Y.Z`, `X.x`,
 * joined by `||`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

type Version = [number, number, number];

function parse(text: string): Version | undefined {
  const m = /^v?(\d+)(?:\.(\d+|x))?(?:\.(\d+|x))?/.exec(text.trim());
  if (!m) return undefined;
  const n = (s: string | undefined) => (s === undefined || s === 'x' ? 0 : Number(s));
  return [Number(m[1]), n(m[2]), n(m[3])];
}

function compare(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** Whether `version` (e.g. `v24.1.0`) satisfies one comparator set of the range. */
function satisfiesOne(version: Version, part: string): boolean {
  const p = part.trim();
  if (p === '' || p === '*') return true;
  if (p.startsWith('^')) {
    const min = parse(p.slice(1));
    return min !== undefined && version[0] === min[0] && compare(version, min) >= 0;
  }
  if (p.startsWith('>=')) {
    const min = parse(p.slice(2));
    return min !== undefined && compare(version, min) >= 0;
  }
  const exact = parse(p);
  if (exact === undefined) return false;
  if (/^\d+(\.x)?$/.test(p)) return version[0] === exact[0];
  return compare(version, exact) === 0;
}

/** Whether `version` satisfies `range` (`^22.19.0 || ^24.0.0`). */
export function satisfies(version: string, range: string): boolean {
  const v = parse(version);
  return v !== undefined && range.split('||').some((part) => satisfiesOne(v, part));
}

/** The refusal line for a Node outside `range`, or undefined when it is supported. */
export function unsupportedNode(version: string, range: string): string | undefined {
  if (satisfies(version, range)) return undefined;
  return `this is Node ${version}; durable-agent-fleet supports Node ${range} (package.json engines): install a supported Node`;
}

/** The package's own package.json: the nearest one up from this file (src/server, or dist/src/server). */
function enginesRange(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; engines?: { node?: string } };
      if (pkg.name === 'durable-agent-fleet') return pkg.engines?.node;
    }
    dir = dirname(dir);
  }
  return undefined;
}

/** At an entry point's start: on an unsupported Node, one line and exit 1. */
export function refuseUnsupportedNode(processName: string): void {
  const range = enginesRange();
  const problem = range === undefined ? undefined : unsupportedNode(process.version, range);
  if (problem === undefined) return;
  process.stderr.write(`${processName}: cannot start: ${problem}\n`);
  process.exit(1);
}
