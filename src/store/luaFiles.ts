/**
 * The Lua of src/store/lua as files: `<name>-<N>.lua` is one atomic change declaring N keys, `includes/<x>.lua` what
 * a `-- @include x` line names. Read by the script loader (luaScripts.ts, which inlines the includes) and by the
 * commit's function library (luaLibrary.ts, which defines them once at its top level).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvariantError } from '../core/errors.js';

const luaDir = join(dirname(fileURLToPath(import.meta.url)), 'lua');

/** `-- @include <name>`: an include of ours (includes/<name>.lua) or one of BullMQ's scripts (`bullmq:<script>`). */
export const INCLUDE_LINE = /^-- @include (\S+)\s*$/gm;

export interface LuaFile {
  name: string;
  numberOfKeys: number;
  /** The file's text, its `-- @include` lines as written. */
  source: string;
}

let files: LuaFile[] | undefined;

/** Every `<name>-<N>.lua` of src/store/lua, read once. */
export function luaFiles(): LuaFile[] {
  files ??= luaFilesIn(luaDir);
  return files;
}

/**
 * The `<name>-<N>.lua` files of `dir`. Two files of one name (a script whose key count changed, its old file left in
 * a build directory) are refused: which of them ran would depend on the directory's order.
 */
export function luaFilesIn(dir: string): LuaFile[] {
  const found = readdirSync(dir)
    .filter((f) => f.endsWith('.lua'))
    .map((file) => {
      const m = /^(.+)-(\d+)\.lua$/.exec(file);
      if (!m) throw new InvariantError('script_failed', `Lua file ${file} must be named <name>-<numberOfKeys>.lua`);
      return { name: m[1]!, numberOfKeys: Number(m[2]), source: readFileSync(join(dir, file), 'utf8') };
    });
  const seen = new Set<string>();
  for (const f of found) {
    if (seen.has(f.name)) throw new InvariantError('script_failed', `two Lua files for script ${f.name} in ${dir}`);
    seen.add(f.name);
  }
  return found;
}

/** The text of src/store/lua/includes/<name>.lua. */
export function includeSource(name: string): string {
  return readFileSync(join(luaDir, 'includes', `${name}.lua`), 'utf8');
}
