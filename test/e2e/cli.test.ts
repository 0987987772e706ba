/**
 * The `agent-fleet` command as a user meets it (the real bin, spawned): help for the command and each subcommand
 * (commands, options, the settings each reads, the docs) without booting anything; no command or an unknown one
 * refused; `--agents` without a module refused; an agents module that never settles named after
 * AGENTS_LOAD_TIMEOUT_MS; and ctl's expected failures (no API, an API that never answers, no token, a refused token,
 * a setting the API lacks) as one line naming the cause and the fix, with a non-zero exit. The help and ctl load no
 * tokenizer (its ranks are 0.3 s of start).
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/config.js';
import { commandHelp, COMMANDS } from '../../src/server/cliHelp.js';
import { createHarness, redisUrl, type Harness } from '../../testkit/harness.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

interface Exit {
  code: number;
  out: string;
  err: string;
}

function cli(args: string[], env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeArgs, ...moduleArgs('src/server/cli'), ...args],
      { env: { ...process.env, LOG_LEVEL: 'info', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, out: stdout, err: stderr });
      },
    );
  });
}

const OPERATOR_TOKEN = 'cli-test-operator';
let withToken: Harness & { url?: string };
let without: Harness & { url?: string };
const tmp = mkdtempSync(join(tmpdir(), 'cli-test-'));

beforeAll(async () => {
  withToken = await createHarness('cli-auth', { OPERATOR_TOKEN });
  withToken.url = (await withToken.startApi()).url;
  without = await createHarness('cli-noauth');
  without.url = (await without.startApi()).url;
}, 60_000);
afterAll(async () => {
  await withToken?.close();
  await without?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const oneLine = (text: string) => {
  expect(text.trim().split('\n')).toHaveLength(1);
  expect(text).not.toMatch(/\n\s+at /);
};

describe('agent-fleet help', () => {
  it.concurrent('--help lists every command and the docs, exit 0', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    for (const name of Object.keys(COMMANDS)) expect(r.out).toMatch(new RegExp(`^  ${name} `, 'm'));
    expect(r.out).toContain('docs/configuration.md');
  });

  it.concurrent('no command and an unknown command exit non-zero, saying which', async () => {
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.err).toContain('no command given');
    const unknown = await cli(['apii']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown command 'apii'");
  });

  it.concurrent(
    "each command's --help names its options, settings with defaults and docs, and boots nothing",
    async () => {
      // A store that is not there: a process that booted would fail or hang, not print its help and exit 0.
      const dead = `redis://127.0.0.1:${await freePort()}`;
      for (const command of ['api', 'worker', 'reconciler', 'replay'] as const) {
        const r = await cli([command, '--help'], { REDIS_URL: dead });
        expect(r.code, command).toBe(0);
        expect(r.out).toContain(`usage: agent-fleet ${command}`);
        expect(r.out).toContain('--agents <module>');
        expect(r.out).toMatch(/REDIS_URL\s+default: required \(or REDIS_CLUSTER_NODES \/ REDIS_SENTINELS\)/);
        expect(r.out).toMatch(/AGENTS_LOAD_TIMEOUT_MS\s+default: 60000/);
        expect(r.out).toContain('docs/');
        expect(r.out).not.toMatch(/api_listening|worker_started|reconciler_started/);
      }
      expect((await cli(['api', '--help'])).out).toMatch(/PORT\s+default: 3000/);
    },
  );

  it.concurrent('--help and ctl --help load no tokenizer: what they import, as a module hook sees it', async () => {
    // A resolve hook (node:module register) that writes each module's URL as the process resolves it.
    writeFileSync(
      join(tmp, 'hooks.mjs'),
      'export async function resolve(s, c, next) { const r = await next(s, c); process.stderr.write(`loaded ${r.url}\\n`); return r; }\n',
    );
    writeFileSync(
      join(tmp, 'register.mjs'),
      "import { register } from 'node:module';\nregister(new URL('./hooks.mjs', import.meta.url));\n",
    );
    for (const args of [['--help'], ['ctl', '--help']]) {
      const r = await cli(args, {}, ['--import', join(tmp, 'register.mjs')]);
      expect(r.code, args.join(' ')).toBe(0);
      const loaded = r.err.split('\n').filter((l) => l.startsWith('loaded '));
      expect(loaded.some((l) => /src\/server\/cli\.(ts|js)$/.test(l))).toBe(true);
      expect(loaded.filter((l) => l.includes('gpt-tokenizer'))).toEqual([]);
    }
  });

  it('every setting a help names is one of the configuration schema', () => {
    for (const c of Object.values(COMMANDS))
      for (const s of c.settings) expect(Object.keys(configSchema.shape)).toContain(s);
    // agentctl's settings are the shell's: its timeout is named with its default.
    expect(commandHelp('ctl')).toMatch(/--timeout MS .*default: \$AGENTCTL_TIMEOUT_MS, else 10000/);
    expect(commandHelp('ctl')).toContain('AGENTCTL_TIMEOUT_MS');
  });

  it.concurrent("ctl --help lists ctl's commands and its defaults, exit 0", async () => {
    for (const args of [
      ['ctl', '--help'],
      ['ctl', '-h'],
    ]) {
      const r = await cli(args);
      expect(r.code).toBe(0);
      expect(r.out).toContain('AGENTCTL_URL');
      expect(r.out).toContain('OPERATOR_TOKEN');
      expect(r.out).toContain('approve|reject <actionId>');
    }
    const unknown = await cli(['ctl', 'frobnicate']);
    expect(unknown.code).toBe(2);
    oneLine(unknown.err);
  });
});

describe('agent-fleet refusals', () => {
  it.concurrent('--agents with no module is refused, like --agents=', async () => {
    for (const args of [
      ['api', '--agents'],
      ['api', '--agents='],
      ['worker', '--agents', '--other'],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toContain('--agents needs a module');
      oneLine(r.err);
    }
  });

  it.concurrent('an agents module that never settles is named once AGENTS_LOAD_TIMEOUT_MS passes', async () => {
    const never = join(tmp, 'never.mjs');
    writeFileSync(never, 'export default () => new Promise(() => {});\n');
    const tla = join(tmp, 'tla.mjs');
    writeFileSync(tla, 'await new Promise(() => {});\nexport default [];\n');
    for (const module of [never, tla]) {
      const r = await cli(['worker', '--agents', module], {
        REDIS_URL: redisUrl(),
        AGENTS_LOAD_TIMEOUT_MS: '500',
        WORKER_METRICS_PORT: '0',
      });
      expect(r.code, module).not.toBe(0);
      expect(r.out + r.err).toContain(`AGENTS_MODULE=${module}`);
      expect(r.out + r.err).toContain('AGENTS_LOAD_TIMEOUT_MS=500');
      expect(r.out + r.err).not.toContain('unsettled top-level await');
    }
  });
});

describe('agent-fleet ctl failures', () => {
  it.concurrent('an API that cannot be reached: one line naming the URL and the fix', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const r = await cli(['ctl', 'approvals', '--url', url, '--token', 't']);
    expect(r.code).toBe(1);
    oneLine(r.err);
    expect(r.err).toContain(`cannot reach ${url}`);
    expect(r.err).toContain('AGENTCTL_URL');
  });

  it.concurrent(
    'an API that takes the request and never answers: --timeout per request, 3 in all, one line',
    async () => {
      const seen: string[] = [];
      const hung = createServer((req) => void seen.push(`${req.method} ${req.url}`)); // accepts, never answers
      await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
      try {
        const started = Date.now();
        const r = await cli(['ctl', 'runs', '--url', url, '--token', 't', '--timeout', '1000']);
        expect(Date.now() - started).toBeLessThan(20_000);
        expect(r.code).toBe(1);
        oneLine(r.err);
        expect(r.err).toContain(`no answer from ${url} within 1 s`);
        expect(r.err).toContain('--timeout');
        expect(r.err).not.toContain('start the API');
        // 3 attempts in all (on a loaded machine an attempt may time out before its request is read).
        expect(seen.length).toBeGreaterThanOrEqual(1);
        expect(seen.length).toBeLessThanOrEqual(3);
        expect(new Set(seen)).toEqual(new Set(['GET /v1/runs']));
        // AGENTCTL_TIMEOUT_MS when --timeout is not given; a timeout that is not a number of ms is a usage error.
        const byEnv = await cli(['ctl', 'approvals', '--url', url, '--token', 't'], { AGENTCTL_TIMEOUT_MS: '700' });
        expect(byEnv.code).toBe(1);
        expect(byEnv.err).toContain(`no answer from ${url} within 0.7 s`);
        const bad = await cli(['ctl', 'runs', '--url', url, '--timeout', '10s']);
        expect(bad.code).toBe(2);
        expect(bad.err).toContain('--timeout must be a whole number of milliseconds');
      } finally {
        hung.closeAllConnections();
        hung.close();
      }
    },
  );

  it.concurrent('no token and a refused token are told apart', async () => {
    const env = { OPERATOR_TOKEN: '', AGENTCTL_URL: withToken.url! };
    const none = await cli(['ctl', 'approvals'], env);
    expect(none.code).toBe(1);
    oneLine(none.err);
    expect(none.err).toContain('no token given');
    const bad = await cli(['ctl', 'approvals', '--token', 'wrong'], env);
    expect(bad.code).toBe(1);
    oneLine(bad.err);
    expect(bad.err).toContain('refused the token');
    const ok = await cli(['ctl', 'approvals'], { ...env, OPERATOR_TOKEN });
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toHaveProperty('approvals');
  });

  it.concurrent('an API without the setting its route needs: one line naming it', async () => {
    const r = await cli(['ctl', 'approvals', '--url', without.url!, '--token', 'x']);
    expect(r.code).toBe(1);
    oneLine(r.err);
    expect(r.err).toContain('missing a setting');
    expect(r.err).toContain('OPERATOR_TOKEN');
  });
});
