/**
 * The dependency rule (.dependency-cruiser.cjs, run by `npm test`) fails on a
 * deliberate violation: checked on a temporary copy of src/ so the worktree is
 * never touched (other test files read src/ while this one runs).
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = process.cwd();
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'depcruise-'));
  cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(root, 'tsconfig.json'), join(dir, 'tsconfig.json'));
  cpSync(join(root, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function cruise(): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      join(root, 'node_modules/.bin/depcruise'),
      ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'],
      { cwd: dir },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: `${stdout}${stderr}` });
      },
    );
  });
}

describe('the dependency rule', () => {
  it('passes on src/ as it is, and fails naming the rule when the worker imports an agent, or core another folder, or two modules import each other', async () => {
    expect(await cruise()).toMatchObject({ code: 0 });

    writeFileSync(
      join(dir, 'src/worker/zzViolation.ts'),
      "import agents from '../agents/index.js';\nexport const all = agents;\n",
    );
    const engine = await cruise();
    expect(engine.code).not.toBe(0);
    expect(engine.out).toMatch(/engine-knows-no-agent: src\/worker\/zzViolation\.ts → src\/agents\/index\.ts/);
    rmSync(join(dir, 'src/worker/zzViolation.ts'));

    writeFileSync(join(dir, 'src/core/zzA.ts'), "import { b } from './zzB.js';\nexport const a = () => b;\n");
    writeFileSync(
      join(dir, 'src/core/zzB.ts'),
      "import type { Config } from '../config/config.js';\nimport { a } from './zzA.js';\nexport const b = (c?: Config) => [a, c];\n",
    );
    const cycle = await cruise();
    expect(cycle.code).not.toBe(0);
    expect(cycle.out).toMatch(/no-circular: src\/core\/zz[AB]\.ts/);
    expect(cycle.out).toMatch(/core-stands-alone: src\/core\/zzB\.ts → src\/config\/config\.ts/);
  });
});
