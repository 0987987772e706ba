/**
 * The Lua of src/store/lua (luaFiles.ts) by name, loaded once: scripts (EVALSHA), and the step's commit as a function
 * of a library (FCALL, luaLibrary.ts). `-- @include x` pulls src/store/lua/includes/x.lua; `-- @include
 * bullmq:addStandardJob` / `bullmq:addPrioritizedJob` / `bullmq:moveToFinished` pull BullMQ's own scripts
 * (bullmqInternals.ts).
 * Decision record 0002: docs/decisions/0002-scripts-check-then-write.md.
 */
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { Cluster, Command } from 'ioredis';
import type { RedisClient } from './connect.js';
import {
  bullmqAddPrioritizedJobFunction,
  bullmqAddStandardJobFunction,
  bullmqMoveToFinishedFunction,
} from './bullmqInternals.js';
import { InvariantError } from '../core/errors.js';
import { buildLibrary, LIBRARY_SCRIPTS, type LuaLibrary } from './luaLibrary.js';
import { includeSource, INCLUDE_LINE, luaFiles } from './luaFiles.js';

export interface ScriptDef {
  name: string;
  numberOfKeys: number;
  lua: string;
}

/** A script's source with its `-- @include` lines replaced by what they name (also for bench variants of a script). */
export function resolveIncludes(source: string, seen = new Set<string>()): string {
  return source.replace(INCLUDE_LINE, (_line, name: string) => {
    if (seen.has(name)) return '';
    seen.add(name);
    if (name === 'bullmq:addStandardJob') return bullmqAddStandardJobFunction();
    if (name === 'bullmq:addPrioritizedJob') return bullmqAddPrioritizedJobFunction();
    if (name === 'bullmq:moveToFinished') return bullmqMoveToFinishedFunction();
    return resolveIncludes(includeSource(name), seen);
  });
}

let cached: ScriptDef[] | undefined;

export function scriptDefs(): ScriptDef[] {
  cached ??= luaFiles().map((f) => ({ name: f.name, numberOfKeys: f.numberOfKeys, lua: resolveIncludes(f.source) }));
  return cached;
}

export type ScriptArg = string | number | Buffer;
type ScriptFn = (...args: ScriptArg[]) => Promise<unknown>;

/**
 * A script call as one ioredis Command (EVALSHA; EVAL the first time on each
 * connection and after a NOSCRIPT, as ioredis's own defineCommand does), with a
 * leaner wire encoding: ioredis encodes a command that carries any Buffer
 * argument piece by piece (three buffer writes per argument); here the command
 * is written into one slab (encodeCommand), and the argument array is not
 * flattened. The commit sends ~60 arguments per step, so this is a measurable
 * part of a step's CPU.
 */
class ScriptCommand extends Command {
  constructor(
    private readonly def: LoadedScript,
    args: readonly ScriptArg[],
    replyEncoding: 'utf8' | null = 'utf8',
  ) {
    // Arguments are set after construction: Command's constructor flattens its
    // argument array (Array#flat, several µs for the commit's ~60) and
    // stringifies it; encodeCommand does both in its one pass. concat, not a
    // spread: it sizes the array once, where spreading ~60 arguments here grew it
    // step by step (about 3 KB of garbage per commit against 0.6).
    super('evalsha', [], { replyEncoding });
    (this as unknown as { args: ScriptArg[] }).args = ([def.sha, def.numberOfKeys] as ScriptArg[]).concat(args);
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

/** A library script's call (FCALL), with the same wire encoding; luaLibrary.ts says why the commit is one. */
class FunctionCommand extends Command {
  constructor(fn: string, numberOfKeys: number, args: readonly ScriptArg[]) {
    super('fcall', [], { replyEncoding: 'utf8' });
    (this as unknown as { args: ScriptArg[] }).args = ([fn, numberOfKeys] as ScriptArg[]).concat(args);
  }

  override toWritable(_socket: object): Buffer {
    const self = this as unknown as { name: string; args: ScriptArg[] };
    return encodeCommand(self.name, self.args);
  }
}

/**
 * Commands are encoded into a shared slab (as Node's own Buffer pool does): each command is a view of the slab's next
 * bytes, never written again (a fresh slab replaces a full one; a slab lives while a view of it waits in the socket).
 */
const SLAB_BYTES = 64 * 1024;
let slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
let slabUsed = 0;

/**
 * RESP encoding of one command, written straight into the slab: no joined string, no Buffer.byteLength pass over
 * each argument (the commit sends ~60 arguments per step), integers written as digits without a String.
 */
export function encodeCommand(name: string, args: ScriptArg[]): Buffer {
  // An upper bound: a UTF-16 code unit is at most 3 UTF-8 bytes; a header at most 24.
  let bound = 32 + name.length * 3;
  for (const arg of args)
    bound += 24 + (typeof arg === 'string' ? arg.length * 3 : typeof arg === 'number' ? 24 : arg.length);
  if (slab.length - slabUsed < bound) {
    slab = Buffer.allocUnsafeSlow(Math.max(SLAB_BYTES, bound));
    slabUsed = 0;
  }
  const buf = slab;
  const start = slabUsed;
  let o = start;
  buf[o++] = 42; // '*'
  o = writeUint(buf, o, args.length + 1);
  o = crlf(buf, o);
  o = writeBulkString(buf, o, name);
  for (const arg of args) {
    if (typeof arg === 'string') o = writeBulkString(buf, o, arg);
    else if (typeof arg !== 'number') o = writeBulkBytes(buf, o, arg);
    else if (Number.isSafeInteger(arg) && arg >= 0) o = writeBulkUint(buf, o, arg);
    else o = writeBulkString(buf, o, String(arg));
  }
  slabUsed = o;
  return buf.subarray(start, o);
}

function digits(n: number): number {
  let d = 1;
  for (; n >= 10; d++) n = Math.floor(n / 10);
  return d;
}

function writeUint(buf: Buffer, o: number, n: number): number {
  const end = o + digits(n);
  let i = end;
  do {
    buf[--i] = 48 + (n % 10);
    n = Math.floor(n / 10);
  } while (n > 0);
  return end;
}

function crlf(buf: Buffer, o: number): number {
  buf[o] = 13;
  buf[o + 1] = 10;
  return o + 2;
}

/**
 * `$<bytes>\r\n<string>\r\n`. The string is written first, after a header sized for its length in code units (its
 * UTF-8 length is at least that); when the byte count needs more digits, the bytes move up to make room.
 */
function writeBulkString(buf: Buffer, o: number, s: string): number {
  const guessed = digits(s.length) + 3;
  const n = s.length === 0 ? 0 : buf.write(s, o + guessed);
  const header = n === s.length ? guessed : digits(n) + 3;
  if (header !== guessed) buf.copyWithin(o + header, o + guessed, o + guessed + n);
  buf[o] = 36; // '$'
  crlf(buf, writeUint(buf, o + 1, n));
  return crlf(buf, o + header + n);
}

function writeBulkBytes(buf: Buffer, o: number, b: Buffer): number {
  buf[o] = 36;
  o = crlf(buf, writeUint(buf, o + 1, b.length));
  return crlf(buf, o + b.copy(buf, o));
}

function writeBulkUint(buf: Buffer, o: number, n: number): number {
  buf[o] = 36;
  o = crlf(buf, writeUint(buf, o + 1, digits(n)));
  return crlf(buf, writeUint(buf, o, n));
}

interface LoadedScript extends ScriptDef {
  sha: string;
  /** The library function that runs it (LIBRARY_SCRIPTS), called by FCALL; undefined for a script (EVALSHA). */
  fn?: string;
  /** Connections (sockets) that have run the script once by EVAL. */
  sockets: WeakSet<object>;
}

let loadedDefs: Map<string, LoadedScript> | undefined;

function loadedScript(name: string): LoadedScript | undefined {
  loadedDefs ??= new Map(
    scriptDefs().map((d) => [
      d.name,
      {
        ...d,
        sha: createHash('sha1').update(d.lua).digest('hex'),
        sockets: new WeakSet(),
        ...(LIBRARY_SCRIPTS.has(d.name) ? { fn: library().functions.get(d.name) } : {}),
      },
    ]),
  );
  return loadedDefs.get(name);
}

/**
 * Reads and checks every script once and loads the function library on the server (a bad Lua file fails at boot,
 * not at first use; the first steps do not meet the library's absence).
 */
export async function loadScripts(client: RedisClient): Promise<void> {
  for (const def of scriptDefs()) loadedScript(def.name);
  await loadLibrary(client);
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
export function coalesceWrites(client: RedisClient): void {
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
  return (...args: ScriptArg[]) => send(client, def, args);
}

/**
 * A script whose reply is bytes: every string in it a Buffer, as Redis holds it (a reply that may carry compressed
 * values, which a UTF-8 decoding would break).
 */
export function scriptBytes(client: RedisClient, name: string): ScriptFn {
  const def = loadedScript(name);
  if (!def) throw new InvariantError('script_failed', `unknown script ${name}`);
  if (def.fn) throw new InvariantError('script_failed', `${name} is a library function: its reply is text`);
  return (...args: ScriptArg[]) => send(client, def, args, null);
}

/**
 * A script call whose arguments are already one array: for the commit's ~60, built by concat (sized once), where a
 * call with several spreads grows its argument list step by step.
 */
export function callScript(client: RedisClient, name: string, args: readonly ScriptArg[]): Promise<unknown> {
  const def = loadedScript(name);
  if (!def) throw new InvariantError('script_failed', `unknown script ${name}`);
  return send(client, def, args);
}

function send(
  client: RedisClient,
  def: LoadedScript,
  args: readonly ScriptArg[],
  replyEncoding: 'utf8' | null = 'utf8',
): Promise<unknown> {
  if (def.fn) return callFunction(client, def.fn, def.numberOfKeys, args);
  const cmd = new ScriptCommand(def, args, replyEncoding);
  coalesceWrites(client);
  // A NOSCRIPT (script cache flushed) is answered by sending it again: toWritable then sends EVAL.
  return (client.sendCommand(cmd) as Promise<unknown>).catch((err: unknown) => {
    if (!messageHas(err, 'NOSCRIPT')) throw err;
    return client.sendCommand(new ScriptCommand(def, args, replyEncoding));
  });
}

/** A Redis error reply naming `text` (anything else thrown is passed on as it is). */
function messageHas(err: unknown, text: string): boolean {
  return err instanceof Error && err.message.includes(text);
}

let built: LuaLibrary | undefined;

/** The function library of LIBRARY_SCRIPTS (luaLibrary.ts), built once. */
export function library(): LuaLibrary {
  built ??= buildLibrary();
  return built;
}

/**
 * FCALL of a library function. A server without the library (a new node, a FUNCTION FLUSH) answers "Function not
 * found": the library is loaded there and the call sent again, as a script's NOSCRIPT is answered by EVAL.
 */
function callFunction(client: RedisClient, fn: string, numberOfKeys: number, args: readonly ScriptArg[]) {
  coalesceWrites(client);
  return (client.sendCommand(new FunctionCommand(fn, numberOfKeys, args)) as Promise<unknown>).catch(
    async (err: unknown) => {
      if (!messageHas(err, 'Function not found')) throw err;
      await loadLibrary(client);
      return client.sendCommand(new FunctionCommand(fn, numberOfKeys, args));
    },
  );
}

/**
 * Loads the library on the server a client writes to (every master of a Cluster). Loading a library of the same
 * name again is refused ("already exists"): it is there, which is all a caller needs.
 */
export async function loadLibrary(client: RedisClient, lib: LuaLibrary = library()): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  await Promise.all(
    nodes.map((node) =>
      node.call('FUNCTION', 'LOAD', lib.code).catch((err: unknown) => {
        if (!messageHas(err, 'already exists')) throw err;
      }),
    ),
  );
}
