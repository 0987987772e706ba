/**
 * Loads the Lua files of src/lua once per client and exposes them by name.
 * `name-N.lua` declares N keys; `-- @include x` pulls src/lua/includes/x.lua;
 * `-- @include bullmq:addStandardJob` / `bullmq:moveToFinished` pull BullMQ's own scripts (bullmqInternals.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import type { RedisClient } from './connect.js';
import { bullmqAddStandardJobFunction, bullmqMoveToFinishedFunction } from './bullmqInternals.js';

const luaDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'lua');

export interface ScriptDef {
  name: string;
  numberOfKeys: number;
  lua: string;
}

function resolveIncludes(source: string, seen = new Set<string>()): string {
  return source.replace(/^-- @include (\S+)\s*$/gm, (_line, name: string) => {
    if (seen.has(name)) return '';
    seen.add(name);
    if (name === 'bullmq:addStandardJob') return bullmqAddStandardJobFunction();
    if (name === 'bullmq:moveToFinished') return bullmqMoveToFinishedFunction();
    return resolveIncludes(readFileSync(join(luaDir, 'includes', `${name}.lua`), 'utf8'), seen);
  });
}

let cached: ScriptDef[] | undefined;

export function scriptDefs(): ScriptDef[] {
  if (cached) return cached;
  cached = readdirSync(luaDir)
    .filter((f) => f.endsWith('.lua'))
    .map((file) => {
      const m = /^(.+)-(\d+)\.lua$/.exec(file);
      if (!m) throw new Error(`Lua file ${file} must be named <name>-<numberOfKeys>.lua`);
      return { name: m[1]!, numberOfKeys: Number(m[2]), lua: resolveIncludes(readFileSync(join(luaDir, file), 'utf8')) };
    });
  return cached;
}

type ScriptFn = (...args: (string | number | Buffer)[]) => Promise<unknown>;

const loaded = new WeakSet<object>();

/** Defines every script as a command on the client (EVALSHA with EVAL fallback, by ioredis). */
export function loadScripts(client: RedisClient): void {
  if (loaded.has(client)) return;
  for (const def of scriptDefs()) {
    client.defineCommand(`agent_${def.name}`, { numberOfKeys: def.numberOfKeys, lua: def.lua });
  }
  loaded.add(client);
}

export function script(client: RedisClient, name: string): ScriptFn {
  loadScripts(client);
  const fn = (client as unknown as Record<string, ScriptFn>)[`agent_${name}`];
  if (!fn) throw new Error(`unknown script ${name}`);
  return fn.bind(client);
}
