/**
 * The step's commit runs as a function of a Redis function library (FUNCTION LOAD once per server, FCALL on every
 * step), not as a script (EVALSHA). A script is one Lua chunk run anew on each call, and every `local function` in
 * it is made again each time: the commit holds BullMQ's moveToFinished, addStandardJob and addPrioritizedJob with
 * about sixty helpers between them, and our own, which cost the server about 5 µs of a step's ~90 (defining them
 * alone, against `return 1`). A library's top level runs once, when it loads: its helpers are made then, and a call
 * runs only the commit's body.
 *
 * The library's name and its functions' names carry a digest of its code: workers of two versions during a rolling
 * upgrade each find their own, and a server that has none (a new node, a FUNCTION FLUSH) answers "Function not
 * found", on which luaScripts.ts loads it and calls again. Functions replicate and persist as data does (the
 * replication stream, the AOF), so a promoted replica has them. Each version leaves its library on the server
 * until deleted (docs/operations.md).
 * Decision record 0015: docs/decisions/0015-the-step-commit-is-a-redis-function.md.
 */
import { createHash } from 'node:crypto';
import { bullmqScriptParts } from './bullmqInternals.js';
import { includeSource, INCLUDE_LINE, luaFiles } from './luaFiles.js';
import { InvariantError } from '../core/errors.js';

/** The scripts of src/store/lua that run as library functions: the one every step runs. */
export const LIBRARY_SCRIPTS: ReadonlySet<string> = new Set(['commitStep']);

const BULLMQ_WRAPPERS = {
  'bullmq:moveToFinished': { script: 'moveToFinished', fn: 'bullmqMoveToFinished' },
  'bullmq:addStandardJob': { script: 'addStandardJob', fn: 'bullmqAddStandardJob' },
  'bullmq:addPrioritizedJob': { script: 'addPrioritizedJob', fn: 'bullmqAddPrioritizedJob' },
} as const;

export interface LuaLibrary {
  /** The library's name (FUNCTION LOAD's `name=`). */
  name: string;
  /** FUNCTION LOAD's argument. */
  code: string;
  /** Script name -> the function FCALL names. */
  functions: Map<string, string>;
}

/**
 * The library of LIBRARY_SCRIPTS. `bodies` replaces a script's source (a bench variant of it); the library then has
 * another digest, so it loads beside the shipped one.
 */
export function buildLibrary(bodies: ReadonlyMap<string, string> = new Map()): LuaLibrary {
  const helpers: string[] = [];
  const defined = new Set<string>();
  // Our includes and BullMQ's wrappers, each once, before the first function that uses them; an include's own
  // includes first.
  const define = (name: string): void => {
    if (defined.has(name)) return;
    defined.add(name);
    const wrapper = BULLMQ_WRAPPERS[name as keyof typeof BULLMQ_WRAPPERS];
    if (wrapper) {
      const parts = bullmqScriptParts(wrapper.script);
      for (const [file, text] of parts.definitions) {
        if (defined.has(file)) continue;
        defined.add(file);
        helpers.push(text);
      }
      helpers.push(`local function ${wrapper.fn}(KEYS, ARGV)\n${parts.body}\nend`);
      return;
    }
    const source = includeSource(name);
    for (const m of source.matchAll(INCLUDE_LINE)) define(m[1]!);
    helpers.push(source.replace(INCLUDE_LINE, ''));
  };
  const registered: { script: string; body: string }[] = [];
  for (const script of LIBRARY_SCRIPTS) {
    const file = luaFiles().find((f) => f.name === script);
    if (!file) throw new InvariantError('script_failed', `no Lua file for library script ${script}`);
    const source = bodies.get(script) ?? file.source;
    for (const m of source.matchAll(INCLUDE_LINE)) define(m[1]!);
    registered.push({ script, body: source.replace(INCLUDE_LINE, '') });
  }
  // BullMQ's helpers call `rcall`, which its scripts set to redis.call; a library's top level cannot reach
  // redis.call (only a call can), so each call sets it first.
  const top = ['local rcall', 'local function noEventStream() end', ...helpers];
  const digest = createHash('sha1')
    .update([...top, ...registered.map((r) => `${r.script}\n${r.body}`)].join('\n'))
    .digest('hex')
    .slice(0, 16);
  const name = `agentfleet_${digest}`;
  const functions = new Map(registered.map((r) => [r.script, `${r.script}_${digest}`]));
  const code = [
    `#!lua name=${name}`,
    ...top,
    ...registered.map(
      (r) =>
        `redis.register_function('${functions.get(r.script)!}', function(KEYS, ARGV)\nrcall = redis.call\n${r.body}\nend)`,
    ),
  ].join('\n');
  return { name, code, functions };
}
