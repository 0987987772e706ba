/** src/store/luaFiles.ts: the script files a directory holds, and the one mistake a build directory can keep. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { luaFiles, luaFilesIn } from '../../src/store/luaFiles.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

function dirWith(files: Record<string, string>): string {
  dir = mkdtempSync(join(tmpdir(), 'lua-files-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('Lua files', () => {
  it('names each script with its key count', () => {
    expect(luaFilesIn(dirWith({ 'reserveSpend-1.lua': 'return 0' }))).toEqual([
      { name: 'reserveSpend', numberOfKeys: 1, source: 'return 0' },
    ]);
  });

  it('refuses two files of one script (an old key count left beside the new one)', () => {
    const d = dirWith({ 'reserveSpend-1.lua': 'return 0', 'reserveSpend-6.lua': 'return 1' });
    expect(() => luaFilesIn(d)).toThrow(/two Lua files for script reserveSpend/);
  });

  it('the shipped directory holds one file per script', () => {
    const names = luaFiles().map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
  });
});
