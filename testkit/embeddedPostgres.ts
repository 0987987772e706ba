/**
 * A real PostgreSQL for the archive in the demo, the tests and the bench, the way embeddedRedis starts redis-server:
 * Debian's server binaries (PATH, else /usr/lib/postgresql/<version>/bin: initdb, postgres) on a free loopback port
 * in a temp dir, trust auth on loopback only, stopped (and its dir removed) on stop(). PostgreSQL refuses to run as
 * root: as root the cluster is made and run as the `postgres` user (Debian's package creates it).
 */
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { onFreePort } from './embeddedRedis.js';
import { startSpawnedServer, untilAnswers, type SpawnedServer } from './spawnedServer.js';

/**
 * `url` is `postgres://postgres@127.0.0.1:<port>/postgres`; kill() sends SIGINT by default (a fast shutdown); restart()
 * recovers a crash from the WAL.
 */
export type EmbeddedPostgres = SpawnedServer;

/** The directory of initdb and postgres, or undefined when PostgreSQL's server is not installed. */
export function postgresBinDir(): string | undefined {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  if (onPath) return onPath.replace(/\/initdb$/, '');
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

/** uid/gid to run as: our own, or the postgres user's when we are root. */
function runAs(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid === 0) {
    throw new Error('PostgreSQL refuses to run as root and there is no postgres user (apt-get install postgresql)');
  }
  return { uid, gid };
}

async function selectOne(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  c.on('error', () => {});
  try {
    await c.connect();
    await c.query('SELECT 1');
  } finally {
    await c.end().catch(() => {});
  }
}

export interface EmbeddedPostgresOptions {
  /** fsync on (a crash loses nothing committed); off by default: the tests' crashes are of processes, not machines. */
  fsync?: boolean;
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const bin = postgresBinDir();
  if (!bin) {
    throw new Error(
      'No PostgreSQL server available for the archive: install it (Debian: apt-get install postgresql; ' +
        'scripts/ci-deps.sh does), or set ARCHIVE_URL=postgres://user:pass@host:5432/db',
    );
  }
  const as = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'agent-pg-'));
  if (as.uid !== undefined) {
    chownSync(dir, as.uid, as.gid!);
    chmodSync(dir, 0o700);
  }
  const data = join(dir, 'data');
  const spawnOpts: SpawnOptions = { ...as, cwd: dir };
  const init = spawnSync(
    join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync'],
    { ...as, cwd: dir, encoding: 'utf8' },
  );
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  return onFreePort((port) => {
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const args = [
      '-D',
      data,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${dir}`,
      '-c',
      `fsync=${opts.fsync === true ? 'on' : 'off'}`,
      '-c',
      'max_connections=200',
    ];
    return startSpawnedServer({
      url,
      port,
      dir,
      spawn: () => spawn(join(bin, 'postgres'), args, { ...spawnOpts, stdio: 'ignore' }),
      ready: () => untilAnswers(`postgres at ${url}`, 30_000, () => selectOne(url)),
      killSignal: 'SIGINT',
      stopSignal: 'SIGINT',
    });
  });
}
