/**
 * What a team does with the package, from docs/getting-started.md's own code blocks: `npm pack` the engine, a
 * new package in a temp folder that installs the tarball and zod, an agent importing the engine by name, built
 * with tsc, the API and a worker started through the package's `agent-fleet` command against the suite's Redis,
 * and a run through the HTTP API to `completed`. The doc's commands run as written; only the package name in
 * `npm install` (the tarball), the Redis URL and the API port are replaced. Installs come from the npm cache
 * (`prefer-offline`): the tarball needs nothing but the registry's packages.
 * On a Node that strips types (22.18 and later) a second worker loads the agent's `.ts` source as it is.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../../testkit/harness.js';
import { deletePrefix, uniquePrefix } from '../../testkit/keyPrefix.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { onLines } from '../../testkit/spawnModule.js';
import { until } from '../../testkit/until.js';

const run = promisify(execFile);
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = join(repoRoot, 'docs', 'getting-started.md');
/** What `npm pack` builds the package from and puts in it (package.json's scripts and `files`). */
const PACKED_FROM = [
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'src',
  'testkit',
  'migrations',
  'docs',
  'LICENSE',
  'README.md',
];
const DOC_REDIS = 'redis://127.0.0.1:6379';
const DOC_PORT = '3000';

interface Block {
  lang: string;
  attrs: string;
  body: string;
}

/** The fenced code blocks of a markdown file, in order: language, the rest of the info string, the text. */
function codeBlocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```(\w+)([^\n]*)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1]!,
    attrs: m[2]!.trim(),
    body: m[3]!,
  }));
}

const typeStripping = Boolean((process.features as { typescript?: unknown }).typescript);
const children: ChildProcess[] = [];
const timings: Record<string, number> = {};
let tmp: string;
let project: string;
let prefix: string;
let apiPort: number;
let env: NodeJS.ProcessEnv;
let substitute: (text: string) => string;

async function timed<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await work();
  } finally {
    timings[name] = Date.now() - started;
  }
}

function bash(script: string, cwd: string, timeout = 400_000): Promise<{ stdout: string; stderr: string }> {
  return run('bash', ['-eo', 'pipefail', '-c', script], { cwd, env, timeout, maxBuffer: 16 * 1024 * 1024 });
}

/** A long-running command of the doc, started as its own process; resolves once it logs `readyCode`. */
async function start(command: string, readyCode: string): Promise<{ child: ChildProcess; lines: string[] }> {
  // Its own process group: npx and the node it starts stop together.
  const child = spawn('bash', ['-c', command], {
    cwd: project,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  const lines: string[] = [];
  onLines(child.stdout, (l) => lines.push(l));
  child.stderr.on('data', (d: Buffer) => lines.push(`stderr: ${d.toString()}`));
  const ready = () => lines.some((l) => l.includes(`"${readyCode}"`));
  await until(`${command} ready or gone`, 60_000, () => ready() || child.exitCode !== null, 50).catch(() => {});
  if (!ready()) throw new Error(`${command} did not start:\n${lines.join('\n')}`);
  return { child, lines };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
}

const blocks = codeBlocks(readFileSync(DOC, 'utf8'));
const commands = blocks.filter((b) => b.lang === 'sh');
const files = blocks.filter((b) => /title="[^"]+"/.test(b.attrs));
const [setup, ...rest] = commands.filter((b) => b.attrs === '');
const server = (name: string) => commands.find((b) => b.attrs === `terminal=${name}`)!.body.trim();

describe('the packed package, as docs/getting-started.md uses it', () => {
  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'packed-'));
    prefix = uniquePrefix('packed');
    apiPort = await freePort();
    env = {
      ...process.env,
      // Installs from the cache; the registry only for what it lacks.
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      KEY_PREFIX: prefix,
      BULL_PREFIX: `${prefix}b`,
      WORKER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    };
    // Packed from a copy of what the package is built from: `npm pack` rebuilds dist/src in place (the prepack
    // script), and the suite's other processes are started from the checkout's dist/ meanwhile (npm test).
    const source = join(tmp, 'source');
    mkdirSync(source);
    for (const f of PACKED_FROM) cpSync(join(repoRoot, f), join(source, f), { recursive: true });
    symlinkSync(join(repoRoot, 'node_modules'), join(source, 'node_modules'));
    const { stdout } = await timed('pack', () =>
      run('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: source, env, timeout: 400_000 }),
    );
    const tarball = join(tmp, stdout.trim().split('\n').pop()!);
    substitute = (text) =>
      text
        .replace(/npm install durable-agent-fleet /g, `npm install ${tarball} `)
        .replaceAll(DOC_REDIS, redisUrl())
        .replaceAll(`127.0.0.1:${DOC_PORT}`, `127.0.0.1:${apiPort}`)
        .replaceAll(`PORT=${DOC_PORT}`, `PORT=${apiPort}`);
  }, 420_000);

  afterAll(async () => {
    await Promise.all(children.map(stop));
    console.log(`packed-package test (ms): ${JSON.stringify(timings)}`);
    rmSync(tmp, { recursive: true, force: true });
    const redis = new Redis(redisUrl());
    for (const p of [prefix, `${prefix}b`]) await deletePrefix(redis, p);
    redis.disconnect();
  });

  it('the doc holds the steps the test runs', () => {
    expect(setup?.body).toMatch(/^mkdir (\S+) && cd \1\n/);
    expect(files.map((f) => /title="([^"]+)"/.exec(f.attrs)![1])).toEqual(['tsconfig.json', 'src/agents.ts']);
    expect(server('api')).toContain('agent-fleet api --agents ./dist/agents.js');
    expect(server('worker')).toContain('agent-fleet worker --agents ./dist/agents.js');
    expect(rest.map((b) => b.body)).toEqual([expect.stringContaining('npx tsc'), expect.stringContaining('/v1/runs')]);
  });

  it('installs, builds, starts through the bin and completes a run', async () => {
    project = join(tmp, /^mkdir (\S+)/.exec(setup!.body)![1]!);
    await timed('install', () => bash(substitute(setup!.body), tmp));
    for (const f of files) {
      const path = join(project, /title="([^"]+)"/.exec(f.attrs)![1]!);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, f.body);
    }
    // docs/client.md's first example beside the agent: the same tsc checks it against the installed types.
    const clientExample = codeBlocks(readFileSync(join(repoRoot, 'docs', 'client.md'), 'utf8')).find(
      (b) => b.lang === 'ts',
    );
    expect(clientExample?.body).toContain("from 'durable-agent-fleet/client'");
    writeFileSync(join(project, 'src', 'producer.ts'), clientExample!.body);
    const [build, startRun] = rest;
    await timed('tsc', () => bash(build!.body, project));
    expect(existsSync(join(project, 'dist', 'producer.js'))).toBe(true);

    // The engine and its test kit by name, from the installed tarball.
    const { stdout: kit } = await bash(
      `node --input-type=module -e "const k = await import('durable-agent-fleet/testkit'); console.log(Object.keys(k).join())"`,
      project,
    );
    expect(kit.trim().split(',')).toEqual(
      expect.arrayContaining(['startEmbeddedRedis', 'startOpenAIServer', 'uniquePrefix']),
    );
    // The docs its README links to and its command's help names ship with it.
    const installed = join(project, 'node_modules', 'durable-agent-fleet');
    const named = new Set(
      [...readFileSync(join(installed, 'README.md'), 'utf8').matchAll(/\]\((docs\/[^)#]+\.md)/g)].map((m) => m[1]!),
    );
    const { stdout: help } = await bash('npx agent-fleet --help', project);
    for (const m of help.matchAll(/docs\/[\w./-]+\.md/g)) named.add(m[0]);
    expect(named.size).toBeGreaterThan(3);
    expect([...named].filter((doc) => !existsSync(join(installed, doc)))).toEqual([]);
    // The entries by audience: an agent author's has no fleet in it; the fleet's has no define*.
    const { stdout: entries } = await bash(
      `node --input-type=module -e "const a = await import('durable-agent-fleet'); const f = await import('durable-agent-fleet/fleet'); console.log(JSON.stringify([Object.keys(a), Object.keys(f)]))"`,
      project,
    );
    const [author, fleet] = JSON.parse(entries) as [string[], string[]];
    expect(author).toEqual(expect.arrayContaining(['defineAgent', 'defineWriteTool', 'httpJson']));
    expect(author).not.toContain('createFleet');
    expect(fleet.sort()).toEqual(['createFleet', 'loadConfig']);
    // The client for producers and operators, by its own entry.
    const { stdout: client } = await bash(
      `node --input-type=module -e "const c = await import('durable-agent-fleet/client'); console.log(Object.keys(c).join())"`,
      project,
    );
    expect(client.trim().split(',')).toEqual(expect.arrayContaining(['FleetClient', 'RunNotFound', 'signWebhook']));

    await timed('api_start', () => start(substitute(server('api')), 'api_listening'));
    const worker = await timed('worker_start', () => start(substitute(server('worker')), 'worker_started'));
    const { stdout } = await timed('run', () => bash(substitute(startRun!.body), project, 60_000));
    const view = JSON.parse(stdout) as { status: string; transcript: unknown[]; agent: { name: string } };
    expect(view.status).toBe('completed');
    expect(view.agent.name).toBe('order-status');
    expect(JSON.stringify(view.transcript)).toContain('Order A-1001 has shipped with UPS.');

    if (!typeStripping) return;
    // The agent's TypeScript source, as it is, from a folder outside the project whose package.json has no
    // "type" and with a top-level await: Node's type stripping loads it as an ES module.
    const plain = join(tmp, 'plain');
    mkdirSync(plain);
    writeFileSync(join(plain, 'package.json'), '{ "name": "plain", "private": true }\n');
    symlinkSync(join(project, 'node_modules'), join(plain, 'node_modules'));
    writeFileSync(join(plain, 'agents.ts'), `${files[1]!.body}await Promise.resolve();\n`);
    await stop(worker.child);
    const tsWorker = substitute(server('worker')).replace('./dist/agents.js', '../plain/agents.ts');
    await timed('ts_worker_start', () => start(tsWorker, 'worker_started'));
    const second = await bash(substitute(startRun!.body).replaceAll('A-1001', 'A-1002'), project, 60_000);
    expect(JSON.parse(second.stdout)).toMatchObject({ status: 'completed' });
  }, 600_000);
});
