/**
 * The dependency rules hold only if depcruise refuses what they forbid: each rule of the
 * layer order (every folder of src/), the composition-root rule, the engine knowing no agent, core standing alone and
 * no cycles gets a planted violation in a scratch tree (the repository's own
 * .dependency-cruiser.cjs, a minimal src/), and depcruise must name that rule and that file; the
 * same tree without the plants passes, and so does the repository's src/ as it is (read only:
 * other test files read src/ while this one runs). The scratch tree is removed afterwards.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const configPath = join(root, '.dependency-cruiser.cjs');
const depcruise = join(root, 'node_modules/.bin/depcruise');

interface Rule {
  name: string;
  from: { path?: string };
  to: { path?: string };
}
const config = createRequire(import.meta.url)(configPath) as { forbidden: Rule[]; layers: { folder: string }[] };
const { forbidden: rules, layers } = config;

/** The folder a rule's `^src/<folder>/` pattern names, or the first of `^src/(a|b)/`. */
function folderOf(pattern: string | undefined): string {
  const m = /^\^src\/\(?([a-z]+)/.exec(pattern ?? '');
  if (!m?.[1]) throw new Error(`not a ^src/<folder>/ pattern: ${pattern}`);
  return m[1];
}

/** Each planted file imports a folder its rule forbids. */
const plants = [
  ...rules
    .filter((r) => r.name.startsWith('layer-'))
    .map((r) => ({ rule: r.name, from: folderOf(r.from.path), to: folderOf(r.to.path) })),
  { rule: 'composition-root-is-a-leaf', from: 'http', to: 'server' },
];

/**
 * The rules that are not one folder against another, each with the files that break it: the
 * worker importing an agent, and two core modules importing each other, one of them config.
 */
const otherPlants: Record<string, string> = {
  'src/agents/index.ts': 'export default [];\n',
  'src/config/config.ts': 'export type Config = { prefix: string };\n',
  'src/worker/zzViolation.ts': "import agents from '../agents/index.js';\nexport const all = agents;\n",
  'src/core/zzA.ts': "import { b } from './zzB.js';\nexport const a = () => b;\n",
  'src/core/zzB.ts':
    "import type { Config } from '../config/config.js';\nimport { a } from './zzA.js';\nexport const b = (c?: Config) => [a, c];\n",
};

const scratch = mkdtempSync(join(tmpdir(), 'dep-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function write(dir: string, file: string, text: string): void {
  mkdirSync(dirname(join(dir, file)), { recursive: true });
  writeFileSync(join(dir, file), text);
}

/** A src/ with one target module per folder, and the planted imports when asked. */
function tree(name: string, planted: boolean): string {
  const dir = join(scratch, name);
  write(
    dir,
    'tsconfig.json',
    JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
      include: ['src'],
    }),
  );
  write(dir, 'package.json', JSON.stringify({ type: 'module' }));
  for (const p of plants) {
    write(dir, `src/${p.to}/target.ts`, 'export const target = 1;\n');
    write(dir, `src/${p.from}/target.ts`, 'export const target = 1;\n');
    if (planted)
      write(
        dir,
        // One file per rule: two rules may plant in the same folder (http -> client, http -> server).
        `src/${p.from}/plant-${p.rule}.ts`,
        `import { target } from '../${p.to}/target.js';\nexport const plant = target;\n`,
      );
  }
  if (planted) for (const [file, text] of Object.entries(otherPlants)) write(dir, file, text);
  // A legal import in the clean tree too: the rules do not refuse everything.
  write(dir, 'src/worker/uses.ts', "import { target } from '../runs/target.js';\nexport const uses = target;\n");
  return dir;
}

/** One line per violation in depcruise's default report: `error <rule>: <from> → <to>`. */
const VIOLATION = /^\s*error ([\w-]+): (\S+) → (\S+)$/gm;

/**
 * `npm run depcruise` on a tree: its exit code (the number of errors), the violations it printed
 * and its whole report (a cycle is printed over several lines).
 */
function cruise(dir: string): Promise<{ code: number; violations: string[]; out: string }> {
  return new Promise((resolve, reject) => {
    execFile(depcruise, ['src', '--config', configPath], { cwd: dir }, (err, stdout) => {
      if (err && typeof err.code !== 'number') return reject(err);
      const violations = [...stdout.matchAll(VIOLATION)].map((m) => `${m[1]}: ${m[2]} -> ${m[3]}`);
      resolve({ code: typeof err?.code === 'number' ? err.code : 0, violations, out: stdout });
    });
  });
}

describe('the dependency rules', () => {
  it('plant one violation per rule: the layer order and the composition root', () => {
    // Every layer but the top one (the entry points, which nothing imports) has its rule, in the layers' order.
    const below = layers.slice(0, -1).map((l) => `layer-${l.folder}`);
    expect(plants.map((p) => p.rule)).toEqual([...below, 'composition-root-is-a-leaf']);
  });

  it.concurrent(
    'depcruise refuses each planted violation, naming its rule and file',
    async () => {
      const { code, violations, out } = await cruise(tree('planted', true));
      expect(code).not.toBe(0);
      for (const p of plants)
        expect(violations).toContain(`${p.rule}: src/${p.from}/plant-${p.rule}.ts -> src/${p.to}/target.ts`);
      expect(violations).toContain('engine-knows-no-agent: src/worker/zzViolation.ts -> src/agents/index.ts');
      expect(violations).toContain('core-stands-alone: src/core/zzB.ts -> src/config/config.ts');
      expect(out).toMatch(/error no-circular: src\/core\/zz[AB]\.ts/);
    },
    60_000,
  );

  it.concurrent(
    'the same tree without the plants passes',
    async () => {
      const { code, violations } = await cruise(tree('clean', false));
      expect(violations).toEqual([]);
      expect(code).toBe(0);
    },
    60_000,
  );

  it.concurrent(
    "the repository's src/ as it is passes",
    async () => {
      const { code, violations } = await cruise(root);
      expect(violations).toEqual([]);
      expect(code).toBe(0);
    },
    60_000,
  );
});
