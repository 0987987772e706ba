/**
 * The run hash's field names are spelled in one place, src/store/runRecord.ts: a command on a run hash elsewhere names
 * its fields through the record's lists or as a `RunField` the compiler checks, never as a bare string.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');
const RECORD = join(SRC, 'store/runRecord.ts');
/** A hash command whose key is a run hash (`k.run`, `keys.run(id).run`, `this.d.keys.run(id).run`). */
const RUN_HASH_COMMAND =
  /\.(hget|hmget|hgetall|hset|hdel|hincrby|hexists)(Buffer)?\(\s*(?:[\w.]*\.)?(?:run\([^()]*\)\.run|k\.run)\b([^;)]*)/g;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Bare field names in a run-hash command's arguments: string literals not checked as a `RunField`. */
function bareFields(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(RUN_HASH_COMMAND)) {
    for (const lit of m[3]!.matchAll(/'([^']*)'(\s+satisfies\s+RunField)?/g)) if (!lit[2]) found.push(lit[1]!);
  }
  return found;
}

describe('run hash field names', () => {
  it('are spelled only in the record module', () => {
    const offenders = sources(SRC)
      .filter((f) => f !== RECORD)
      .flatMap((f) => bareFields(readFileSync(f, 'utf8')).map((field) => `${f.slice(SRC.length + 1)}: '${field}'`));
    expect(offenders).toEqual([]);
  });

  it('the check sees a bare name, and lets a checked one through', () => {
    expect(bareFields("await redis.hmget(k.run, 'status', 'finishedAt');")).toEqual(['status', 'finishedAt']);
    expect(bareFields("await this.d.redis.hincrby(this.d.keys.run(runId).run, 'jobRecreations', 1);")).toEqual([
      'jobRecreations',
    ]);
    expect(bareFields("tx.hdel(k.run, 'search' satisfies RunField);")).toEqual([]);
    expect(bareFields('redis.hmget(k.run, ...ENDED_RUN_FIELDS);')).toEqual([]);
  });
});
