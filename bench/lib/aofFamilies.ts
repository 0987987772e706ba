/**
 * AOF bytes by key family: reads what Redis appended to its current
 * incremental AOF file (Redis >= 7 multi-part AOF: `<dir>/<appenddirname>/`,
 * the manifest names the `type i` file) between two marks, parses the RESP
 * commands (scripts are persisted as their effects, one command per write,
 * wrapped in MULTI/EXEC) and sums each command's bytes by the family of its
 * first key (`classify`). MULTI, EXEC and SELECT count as `aof framing`.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';

export interface AofMark {
  file: string;
  offset: number;
}

async function incrFile(admin: Redis): Promise<string> {
  const [, dir] = (await admin.config('GET', 'dir')) as string[];
  const [, sub] = (await admin.config('GET', 'appenddirname')) as string[];
  const [, name] = (await admin.config('GET', 'appendfilename')) as string[];
  const aofDir = join(dir!, sub!);
  const manifest = readFileSync(join(aofDir, `${name}.manifest`), 'utf8');
  const incr = manifest
    .split('\n')
    .filter((l) => / type i\b/.test(l))
    .map((l) => /^file (\S+)/.exec(l)?.[1])
    .filter(Boolean);
  if (incr.length === 0) throw new Error('no incremental AOF file in the manifest (is AOF on?)');
  return join(aofDir, incr[incr.length - 1]!);
}

/** The current end of the incremental AOF (call after the writes before it are flushed: everysec). */
export async function aofMark(admin: Redis): Promise<AofMark> {
  const file = await incrFile(admin);
  return { file, offset: statSync(file).size };
}

/** Bytes appended since `from` (same file: no AOF rewrite in between), by family of each command's first key. */
export async function aofBytesByFamily(
  admin: Redis,
  from: AofMark,
  classify: (key: string) => string,
): Promise<Map<string, number>> {
  const file = await incrFile(admin);
  if (file !== from.file) throw new Error('the AOF was rewritten between the marks');
  const buf = readFileSync(file).subarray(from.offset);
  const out = new Map<string, number>();
  let i = 0;
  const line = (): string => {
    const end = buf.indexOf('\r\n', i);
    const s = buf.toString('latin1', i, end);
    i = end + 2;
    return s;
  };
  while (i < buf.length) {
    const start = i;
    const head = line();
    if (!head.startsWith('*'))
      throw new Error(`unexpected AOF content at ${from.offset + start}: ${head.slice(0, 20)}`);
    const n = Number(head.slice(1));
    const args: string[] = [];
    for (let a = 0; a < n; a++) {
      const len = Number(line().slice(1));
      args.push(a < 2 ? buf.toString('utf8', i, i + len) : '');
      i += len + 2;
    }
    const cmd = (args[0] ?? '').toUpperCase();
    const family = cmd === 'MULTI' || cmd === 'EXEC' || cmd === 'SELECT' ? 'aof framing' : classify(args[1] ?? '');
    out.set(family, (out.get(family) ?? 0) + (i - start));
  }
  return out;
}
