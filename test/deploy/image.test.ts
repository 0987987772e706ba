/**
 * The production image boots. Without Docker, the image is rebuilt the way the Dockerfile does it:
 * a build folder with package.json, package-lock.json, tsconfig.json, src/ and sandbox/ runs `npm run build`;
 * a runtime folder gets package.json, package-lock.json, `npm ci --omit=dev` (production
 * dependencies only, from the registry) and the built dist/. Every `node dist/...` command named
 * in the Dockerfile and in docker-compose.yml (read from the files, not typed here) then starts
 * under plain node (no tsx) in production mode against the suite's real Redis, with the
 * environment its compose service sets plus the secrets an operator supplies, and must answer on
 * the port and path of its compose health check; then SIGTERM, exit 0.
 * tsx resolves what plain node refuses (an ESM directory import inside bullmq's dist killed
 * every entry point with ERR_UNSUPPORTED_DIR_IMPORT): only the built files under node show it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../testkit/embeddedRedis.js';
import { redisUrl, uniquePrefix } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { startEmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import pg from 'pg';

 
type Obj = Record<string, any>;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** Secrets and endpoints an operator supplies; the shipped files carry none. */
const OPERATOR_ENV: Record<string, string> = {
  PRODUCER_TOKEN: 'image-test-producer-token',
  OPERATOR_TOKEN: 'image-test-operator-token',
  BULL_BOARD_USER: 'image-test',
  BULL_BOARD_PASSWORD: 'image-test-board-password',
  OPENAI_API_KEY: 'image-test-openai-key',
  OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
  SANDBOX_URL: 'http://127.0.0.1:9',
  ZENDESK_EMAIL: 'agent@example.com',
  ZENDESK_TOKEN: 'image-test-zendesk-token',
  RESEND_API_KEY: 're_image_test',
  RESEND_FROM: 'Support <support@example.com>',
  STRIPE_API_KEY: 'sk_test_image',
};

/** A stage of the Dockerfile (by its `AS` name; the last one by default): its ENV, its CMD and what it copies from the build stage ([from, to]). */
function dockerfileStage(name?: string): { env: Record<string, string>; commands: string[][]; fromBuild: [string, string][] } {
  const lines = read('Dockerfile').replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const froms = lines.map((l, i) => (/^FROM\s/i.test(l) ? i : -1)).filter((i) => i >= 0);
  const start = name === undefined ? (froms.pop() ?? 0) : froms.find((i) => new RegExp(`\\sAS\\s+${name}$`, 'i').test(lines[i] as string));
  if (start === undefined) throw new Error(`the Dockerfile has no stage ${name}`);
  const end = froms.find((i) => i > start) ?? lines.length;
  const final = lines.slice(start, end);
  const env: Record<string, string> = {};
  for (const l of final.filter((x) => /^ENV\s/i.test(x))) {
    for (const m of l.replace(/^ENV\s+/i, '').matchAll(/([A-Z0-9_]+)=("[^"]*"|\S+)/g)) env[m[1] as string] = (m[2] as string).replace(/^"|"$/g, '');
  }
  const commands = final.filter((l) => /^(CMD|ENTRYPOINT)\s/i.test(l)).map((l) => JSON.parse(l.replace(/^\S+\s+/, '')) as string[]);
  const fromBuild = final
    .map((l) => /^COPY\s+--from=build\s+\/app\/(\S+)\s+\.\/(\S+)$/i.exec(l))
    .filter((m) => m !== null)
    .map((m) => [m[1], m[2]] as [string, string]);
  return { env, commands, fromBuild };
}

/** The final stage: the production image. */
const dockerfileRuntime = () => dockerfileStage();

interface Entry {
  service: string;
  command: string[];
  env: Record<string, string>;
  healthUrl: string;
  /** The Dockerfile stage its image is built from (compose's build target; the final stage when it names none). */
  target: string | undefined;
}

/** Every compose service that runs `node dist/...`, with its environment and health URL. */
function composeEntries(): Entry[] {
  const compose = parse(read('docker-compose.yml'), { merge: true, maxAliasCount: 100 }) as Obj;
  const out: Entry[] = [];
  for (const [service, s] of Object.entries(compose.services as Record<string, Obj>)) {
    const command = (Array.isArray(s.command) ? s.command : String(s.command ?? '').split(/\s+/)).map(String);
    if (command[0] !== 'node' || !String(command[1]).startsWith('dist/')) continue;
    const env = Object.fromEntries(
      Object.entries((s.environment ?? {}) as Obj).map(([k, v]) => [k, String(v ?? '').replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')]),
    );
    const test = (Array.isArray(s.healthcheck?.test) ? s.healthcheck.test : [s.healthcheck?.test]).join(' ');
    const healthUrl = /http:\/\/127\.0\.0\.1:\d+\/[a-z]+/.exec(test)?.[0];
    if (!healthUrl) throw new Error(`compose service ${service} runs ${command.join(' ')} without an HTTP health check`);
    out.push({ service, command, env, healthUrl, target: (s.build as Obj | undefined)?.target as string | undefined });
  }
  return out;
}

function run(cmd: string, args: string[], cwd: string, timeout: number): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: { ...process.env, NODE_ENV: '' } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} in ${cwd} failed (${r.status ?? r.signal}):\n${r.stdout}${r.stderr}${r.error ?? ''}`);
}

let dir = '';
let app = '';
/** The directory a stage's image is laid out in: the production image's (`app`) or a stage's own beside it. */
const appFor = (target: string | undefined) => (target === undefined ? app : path.join(dir, `app-${target}`));
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'agent-image-'));
  // build stage: sources only (as COPYed by the Dockerfile), the repo's full node_modules for tsc
  const build = path.join(dir, 'build');
  mkdirSync(build);
  for (const f of ['package.json', 'package-lock.json', 'tsconfig.json']) cpSync(path.join(ROOT, f), path.join(build, f));
  for (const d of ['src', 'sandbox', 'migrations']) cpSync(path.join(ROOT, d), path.join(build, d), { recursive: true });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(build, 'node_modules'));
  run('npm', ['run', 'build'], build, INSTALL_TIMEOUT_MS);
  // runtime stage: production dependencies only, then dist/
  app = path.join(dir, 'app');
  mkdirSync(app);
  for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(ROOT, f), path.join(app, f));
  run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], app, INSTALL_TIMEOUT_MS);
  // What each stage copies from the build stage, and nothing else: a folder a process needs (the archive's
  // migrations) and its stage leaves out fails here as it would in the image.
  for (const target of new Set(composeEntries().map((e) => e.target))) {
    const stageApp = appFor(target);
    if (stageApp !== app) {
      mkdirSync(stageApp);
      for (const f of ['package.json', 'node_modules']) symlinkSync(path.join(app, f), path.join(stageApp, f));
    }
    const copies = dockerfileStage(target).fromBuild;
    expect(copies.map(([from]) => from)).toContain('dist/src');
    for (const [from, to] of copies) cpSync(path.join(build, from), path.join(stageApp, to), { recursive: true });
  }
}, INSTALL_TIMEOUT_MS * 2);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

function start(command: string[], env: Record<string, string>, cwd = app): Started {
  const child = spawn(command[0] === 'node' ? process.execPath : (command[0] as string), command.slice(1), {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out, exited };
}

/** Polls the URL until it answers 200, the process exits, or the deadline passes. */
async function waitHealthy(url: string, p: Started, deadlineMs: number): Promise<void> {
  const answered = async () => {
    if (p.child.exitCode !== null) throw new Error(`exited ${p.child.exitCode} before ${url} answered:\n${p.out.join('')}`);
    return fetch(url).then((r) => r.ok, () => false);
  };
  await until(`${url} answering 200`, deadlineMs, answered, 100).catch((e: Error) => {
    throw p.child.exitCode === null ? new Error(`${url} did not answer 200:\n${p.out.join('')}`) : e;
  });
}

describe('production image', () => {
  it('names its entry points in the Dockerfile and docker-compose.yml, each with a health check', () => {
    const entries = composeEntries();
    const commands = new Set(entries.map((e) => e.command.join(' ')));
    expect(commands.size).toBeGreaterThanOrEqual(4);
    const docker = dockerfileRuntime();
    expect(docker.commands.length).toBeGreaterThan(0);
    for (const c of docker.commands) expect([...commands], `Dockerfile ${c.join(' ')} is run by a compose service`).toContain(c.join(' '));
  });

  it('boots every `node dist/...` command under plain node, production mode, real Redis, and stops on SIGTERM', async () => {
    const docker = dockerfileRuntime();
    const byCommand = new Map<string, Entry>();
    for (const e of composeEntries()) if (!byCommand.has(e.command.join(' '))) byCommand.set(e.command.join(' '), e);
    const prefix = uniquePrefix('image');
    const started: { entry: Entry; url: string; p: Started }[] = [];
    try {
      for (const entry of byCommand.values()) {
        // The health check's port is one of the service's variables: give it a free port instead.
        const url = new URL(entry.healthUrl);
        const port = String(await freePort());
        const env: Record<string, string> = { ...docker.env, ...entry.env };
        for (const [k, v] of Object.entries(env)) if (v === url.port) env[k] = port;
        url.port = port;
        Object.assign(env, OPERATOR_ENV, {
          APP_MODE: docker.env.APP_MODE ?? 'production', REDIS_URL: redisUrl(), KEY_PREFIX: prefix, BULL_PREFIX: `${prefix}b`,
          HOST: '127.0.0.1', SANDBOX_HOST: '127.0.0.1', LOG_LEVEL: 'warn',
        });
        expect(env.APP_MODE, entry.service).toBe('production');
        started.push({ entry, url: url.toString(), p: start(entry.command, env, appFor(entry.target)) });
      }
      for (const s of started) await waitHealthy(s.url, s.p, 60_000);
      for (const s of started) s.p.child.kill('SIGTERM');
      for (const s of started) expect(await s.p.exited, `${s.entry.service}: exit code after SIGTERM\n${s.p.out.join('')}`).toBe(0);
    } finally {
      for (const s of started) if (s.p.child.exitCode === null) s.p.child.kill('SIGKILL');
    }
  }, 180_000);

  it('boots with the archive (ARCHIVE_URL on a real PostgreSQL): its migrations are in the image', async () => {
    const archive = await startEmbeddedPostgres();
    const docker = dockerfileRuntime();
    const api = composeEntries().find((e) => e.command.join(' ') === (docker.commands[0] as string[]).join(' ')) as Entry;
    const prefix = uniquePrefix('image-archive');
    const port = String(await freePort());
    const url = new URL(api.healthUrl);
    url.port = port;
    const p = start(api.command, {
      ...docker.env, ...api.env, ...OPERATOR_ENV, PORT: port, HOST: '127.0.0.1', REDIS_URL: redisUrl(), KEY_PREFIX: prefix,
      BULL_PREFIX: `${prefix}b`, ARCHIVE_URL: archive.url, LOG_LEVEL: 'warn',
    });
    try {
      await waitHealthy(url.toString(), p, 60_000);
      const client = new pg.Client({ connectionString: archive.url });
      await client.connect();
      try {
        const applied = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
        expect(applied.rows[0]!.n).toBeGreaterThan(0);
      } finally {
        await client.end();
      }
      p.child.kill('SIGTERM');
      expect(await p.exited, p.out.join('')).toBe(0);
    } finally {
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
      await archive.stop();
    }
  }, 120_000);

  it('refuses to boot as shipped (no secrets in the files): one line naming the missing one, exit non-zero', async () => {
    const docker = dockerfileRuntime();
    const api = composeEntries().find((e) => e.command.join(' ') === (docker.commands[0] as string[]).join(' ')) as Entry;
    const base = { ...docker.env, ...api.env, REDIS_URL: redisUrl(), HOST: '127.0.0.1', PORT: '0' };
    const missingKey = start(api.command, base);
    const missingToken = start(api.command, { ...base, OPENAI_API_KEY: OPERATOR_ENV.OPENAI_API_KEY as string });
    for (const [p, field] of [[missingKey, 'OPENAI_API_KEY'], [missingToken, 'PRODUCER_TOKEN']] as const) {
      expect(await p.exited).not.toBe(0);
      const text = p.out.join('').trim();
      expect(text.split('\n'), text).toHaveLength(1);
      expect(text).toMatch(new RegExp(`^api: cannot start: invalid configuration: .*${field}`));
    }
  }, 60_000);
});
