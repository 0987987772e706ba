/**
 * `npm start` side by side: two real demo processes (each with its own embedded redis-server,
 * sandbox, API and two worker processes) both serve and settle their runs; ports left unset are
 * chosen free, a port set in the environment that is taken is named in one line. With
 * DEMO_MODEL (npm start -- --model=...) a local model server answers over HTTP through the real providers.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnModule } from '../../testkit/spawnModule.js';
import { redisServerOnPath } from '../../testkit/embeddedRedis.js';

interface Demo {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

const demos: Demo[] = [];

function startDemo(env: Record<string, string | undefined> = {}): Demo {
  // Unset: each demo spawns its own Redis and picks its ports.
  const child = spawnModule(
    'demo/main',
    { REDIS_URL: undefined, REDIS_CLUSTER_NODES: undefined, PORT: undefined, WORKER_METRICS_PORT: undefined, ...env },
    ['ignore', 'pipe', 'pipe'],
  );
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const demo = { child, out: () => text, exited };
  demos.push(demo);
  return demo;
}

async function waitFor(demo: Demo, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = demo.out().match(pattern);
    if (m) return m;
    if (demo.child.exitCode !== null) throw new Error(`demo exited ${demo.child.exitCode}:\n${demo.out()}`);
    if (Date.now() > deadline) throw new Error(`no ${pattern} from the demo:\n${demo.out()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

afterAll(() => {
  for (const d of demos) if (d.child.exitCode === null) d.child.kill('SIGKILL');
});

describe.skipIf(!redisServerOnPath())('npm start', () => {
  it('runs twice side by side: each on its own free ports, both settle their runs with no duplicate', async () => {
    const [a, b] = [startDemo(), startDemo()] as [Demo, Demo];
    const apis: string[] = [];
    for (const d of [a, b]) apis.push((await waitFor(d, /API\s+(http:\/\/\S+)\/v1\/runs/, 90_000))[1] as string);
    expect(apis[0]).not.toBe(apis[1]);
    for (const d of [a, b]) {
      const settled = await waitFor(
        d,
        /all runs settled\. sandbox effects: tickets=(\d+) emails=(\d+) duplicates=(\d+)/,
        120_000,
      );
      expect(settled.slice(1)).toEqual(['3', '3', '0']);
    }
    for (const api of apis) expect((await fetch(`${api}/healthz`)).status).toBe(200);
    for (const d of [a, b]) d.child.kill('SIGTERM');
    for (const d of [a, b]) expect(await d.exited, d.out()).toBe(0);
  }, 240_000);

  it('--model=openai-local / anthropic-local (DEMO_MODEL): the same runs through the real AI SDK providers over HTTP to a local model server', async () => {
    const [o, a] = [startDemo({ DEMO_MODEL: 'openai-local' }), startDemo({ DEMO_MODEL: 'anthropic-local' })] as [
      Demo,
      Demo,
    ];
    await waitFor(o, /model\s+openai-compatible demo-local-llama at http:\/\/127\.0\.0\.1:\d+/, 90_000);
    await waitFor(a, /model\s+anthropic demo-local-claude at http:\/\/127\.0\.0\.1:\d+/, 90_000);
    for (const [d, model] of [
      [o, 'demo-local-llama'],
      [a, 'demo-local-claude'],
    ] as const) {
      const settled = await waitFor(
        d,
        /all runs settled\. sandbox effects: tickets=(\d+) emails=(\d+) duplicates=(\d+)\. model server: (\d+) requests, models (\S+)\./,
        120_000,
      );
      // Three tickets of six decisions each, every one asked of the local server by its model id; no decision asked twice.
      expect(settled.slice(1), d.out()).toEqual(['3', '3', '0', '18', model]);
      expect(d.out()).not.toMatch(/\b(failed|needs_human|budget_exceeded)\b/);
    }
    for (const d of [o, a]) d.child.kill('SIGTERM');
    for (const d of [o, a]) expect(await d.exited, d.out()).toBe(0);
  }, 240_000);

  it('names a --model it does not know in one line and exits non-zero', async () => {
    const d = startDemo({ DEMO_MODEL: 'gpt-5-local' });
    expect(await d.exited).not.toBe(0);
    expect(d.out().trim().split('\n')).toEqual([
      expect.stringMatching(
        /^demo: cannot start: --model \(DEMO_MODEL\) must be one of scripted, openai-local, anthropic-local, not 'gpt-5-local'/,
      ),
    ]);
  }, 90_000);

  it('names a port set in the environment that is taken, in one line, and exits non-zero', async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    try {
      const d = startDemo({ PORT: String(port) });
      expect(await d.exited).not.toBe(0);
      expect(d.out().trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^demo: cannot start: port ${port} \\(PORT\\) is already in use`)),
      ]);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 90_000);
});
