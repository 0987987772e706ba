/**
 * Loads the Lua files of src/store/lua once and exposes them by name (EVALSHA).
 * `name-N.lua` declares N keys; `-- @include x` pulls src/store/lua/includes/x.lua;
 * `-- @include bullmq:addStandardJob` / `bullmq:moveToFinished` pull BullMQ's own scripts (bullmqInternals.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { Cluster, Command } from 'ioredis';
import type { RedisClient } from './connect.js';
import { bullmqAddStandardJobFunction, bullmqMoveToFinishedFunction } from './bullmqInternals.js';
import { InvariantError } from '../core/errors.js';

const luaDir = join(dirname(fileURLToPath(import.meta.url)), 'lua');

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
      if (!m) throw new InvariantError('script_failed', `Lua file ${file} must be named <name>-<numberOfKeys>.lua`);
      return {
        name: m[1]!,
        numberOfKeys: Number(m[2]),
        lua: resolveIncludes(readFileSync(join(luaDir, file), 'utf8')),
      };
    });
  return cached;
}

type ScriptArg = string | number | Buffer;
type ScriptFn = (...args: ScriptArg[]) => Promise<unknown>;

/**
 * A script call as one ioredis Command (EVALSHA; EVAL the first time on each
 * connection and after a NOSCRIPT, as ioredis's own defineCommand does), with a
 * leaner wire encoding: ioredis encodes a command that carries any Buffer
 * argument piece by piece (three buffer writes per argument); here the string
 * arguments between Buffers are joined into one string first, and the argument
 * array is not flattened. The commit sends ~60 arguments per step, so this is a
 * measurable part of a step's CPU.
 */
class ScriptCommand extends Command {
  constructor(
    private readonly def: LoadedScript,
    args: ScriptArg[],
  ) {
    // Arguments are set after construction: Command's constructor flattens its
    // argument array (Array#flat, several µs for the commit's ~60) and
    // stringifies it; encodeCommand does both in its one pass.
    super('evalsha', [], { replyEncoding: 'utf8' });
    (this as unknown as { args: ScriptArg[] }).args = [def.sha, def.numberOfKeys, ...args];
  }

  override toWritable(socket: object): Buffer {
    const self = this as unknown as { name: string; args: ScriptArg[]; reject: (err: Error) => void };
    const reject = self.reject;
    self.reject = (err: Error) => {
      if (err.message.includes('NOSCRIPT')) this.def.sockets.delete(socket);
      reject.call(this, err);
    };
    if (!this.def.sockets.has(socket)) {
      this.def.sockets.add(socket);
      self.name = 'eval';
      self.args[0] = this.def.lua;
    } else if (self.name === 'eval') {
      self.name = 'evalsha';
      self.args[0] = this.def.sha;
    }
    return encodeCommand(self.name, self.args);
  }
}

/** RESP encoding of one command: runs of string arguments joined, Buffers copied. */
export function encodeCommand(name: string, args: ScriptArg[]): Buffer {
  const parts: (string | Buffer)[] = [];
  let run = `*${args.length + 1}\r\n$${name.length}\r\n${name}\r\n`;
  for (const arg of args) {
    if (Buffer.isBuffer(arg)) {
      parts.push(`${run}$${arg.length}\r\n`, arg);
      run = '\r\n';
    } else {
      const str = typeof arg === 'string' ? arg : String(arg);
      run += `$${Buffer.byteLength(str)}\r\n${str}\r\n`;
    }
  }
  if (parts.length === 0) return Buffer.from(run);
  parts.push(run);
  let total = 0;
  const lengths = parts.map((p) => {
    const n = typeof p === 'string' ? Buffer.byteLength(p) : p.length;
    total += n;
    return n;
  });
  const out = Buffer.allocUnsafe(total);
  let offset = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (typeof p === 'string') out.write(p, offset, lengths[i]!, 'utf8');
    else p.copy(out, offset);
    offset += lengths[i]!;
  }
  return out;
}

interface LoadedScript extends ScriptDef {
  sha: string;
  /** Connections (sockets) that have run the script once by EVAL. */
  sockets: WeakSet<object>;
}

let loadedDefs: Map<string, LoadedScript> | undefined;

function loadedScript(name: string): LoadedScript | undefined {
  loadedDefs ??= new Map(
    scriptDefs().map((d) => [
      d.name,
      { ...d, sha: createHash('sha1').update(d.lua).digest('hex'), sockets: new WeakSet<object>() },
    ]),
  );
  return loadedDefs.get(name);
}

/** Reads and checks every script once (a bad Lua file fails at boot, not at first use). */
export function loadScripts(_client: RedisClient): void {
  for (const def of scriptDefs()) loadedScript(def.name);
}

const corked = new WeakSet<Socket>();

/**
 * Script calls made in the same tick leave in one write: the connection's
 * socket is corked until the end of the tick. With many steps in flight, the
 * commits of steps whose previous replies arrived together are sent with one
 * writev instead of one write each (as ioredis's autopipelining does, for our
 * commands only). Each command is still its own atomic script; nothing waits
 * longer than the current tick.
 */
function coalesceWrites(client: RedisClient): void {
  if (client instanceof Cluster) return;
  const stream = client.stream as Socket | undefined;
  if (!stream || corked.has(stream) || typeof stream.cork !== 'function') return;
  corked.add(stream);
  stream.cork();
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork();
  });
}

/** A script call as a command to queue in a MULTI (one atomic change made of several scripts of one slot). */
export function scriptCommand(name: string, args: ScriptArg[]): Command {
  const def = loadedScript(name);
  if (!def) throw new InvariantError('script_failed', `unknown script ${name}`);
  return new ScriptCommand(def, args);
}

export function script(client: RedisClient, name: string): ScriptFn {
  const def = loadedScript(name);
  if (!def) throw new InvariantError('script_failed', `unknown script ${name}`);
  return (...args: ScriptArg[]) => {
    const cmd = new ScriptCommand(def, args);
    coalesceWrites(client);
    // A NOSCRIPT (script cache flushed) is answered by sending it again: toWritable then sends EVAL.
    const sent = (client.sendCommand(cmd) as Promise<unknown>).catch((err: Error) => {
      if (!err.message.includes('NOSCRIPT')) throw err;
      return client.sendCommand(new ScriptCommand(def, args));
    });
    return sent;
  };
}
