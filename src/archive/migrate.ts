/**
 * The archive's schema: the numbered files of `migrations/` (`NNN_name.sql`), applied in order, each in its own
 * transaction with its version recorded in `schema_migrations` in the same transaction, so a migrator killed midway
 * leaves the schema at a whole version. A session-level advisory lock lets one process migrate at a time (every
 * process that opens the archive calls migrate at boot).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Pool } from 'pg';
import { ConfigError } from '../core/errors.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** 64-bit key of the advisory lock every migrator takes (any constant: it names the archive's migration). */
const MIGRATION_LOCK = 7_300_241_001;

/** `migrations/` at the repository root, from src/archive or dist/src/archive. */
export function migrationsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, '..', '..', 'migrations'), join(here, '..', '..', '..', 'migrations')];
  const found = candidates.find((d) => existsSync(d));
  if (!found) throw new ConfigError(['ARCHIVE_URL'], 'the archive migrations folder (migrations/) is missing');
  return found;
}

export function readMigrations(dir = migrationsDir()): Migration[] {
  return readdirSync(dir)
    .map((file) => ({ file, m: /^(\d+)_([\w-]+)\.sql$/.exec(file) }))
    .filter((x): x is { file: string; m: RegExpExecArray } => x.m !== null)
    .map(({ file, m }) => ({ version: Number(m[1]), name: m[2]!, sql: readFileSync(join(dir, file), 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

/** Applies the migrations not yet recorded; answers the versions it applied. */
export async function migrate(pool: Pool, migrations = readMigrations()): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set(
      (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
    );
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.release();
  }
  return applied;
}
