/**
 * Timeouts always fire (src/core/timeout.ts): a tool request and a model request
 * to a service that accepts the connection and never answers fail within their
 * 1 s timeout plus a margin, in a child process that forces a GC every 20 ms
 * while it waits (`AbortSignal.any` over `AbortSignal.timeout` never fired there).
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTimeout, TimeoutError } from '../../src/core/timeout.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer(() => {}); // accepts, reads the request, never answers
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

function runChild(
  mode: 'tool' | 'model',
): Promise<{ fired: boolean; elapsedMs: number; error?: string; message?: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [...moduleArgs('test/support/timeoutChild', ['--expose-gc']), `${url}/never`, mode],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('exit', () => {
      const line = out.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line));
      } catch {
        reject(new Error(`child printed no result:\n${out}\n${err}`));
      }
    });
  });
}

describe('timeouts of outbound calls', () => {
  // Generous margin: the claim is that the timeout fires at all, not how precisely (a loaded machine).
  const MARGIN_MS = 4000;

  it('a tool request to a service that never answers fails by its timeout, with GCs during the wait', async () => {
    const r = await runChild('tool');
    expect(r.fired).toBe(true);
    expect(r.message).toMatch(/timed out after 1000 ms/);
    expect(r.elapsedMs).toBeLessThan(1000 + MARGIN_MS);
  }, 20_000);

  it('a model request to a service that never answers fails by its timeout, with GCs during the wait', async () => {
    const r = await runChild('model');
    expect(r.fired).toBe(true);
    expect(r.message).toMatch(/timed out after 1000 ms/);
    expect(r.elapsedMs).toBeLessThan(1000 + MARGIN_MS);
  }, 20_000);

  it('withTimeout rejects with the parent reason on abort and a TimeoutError on time, even when the callee ignores its signal', async () => {
    const never = () => new Promise<never>(() => {});
    await expect(withTimeout(20, undefined, never)).rejects.toBeInstanceOf(TimeoutError);
    const parent = new AbortController();
    const p = withTimeout(60_000, parent.signal, never);
    parent.abort(new Error('stop'));
    await expect(p).rejects.toThrow('stop');
    expect(await withTimeout(60_000, undefined, async (s) => s.aborted)).toBe(false);
  });

  it('a limit longer than a Node timer holds (2^31 - 1 ms) does not fire at once', async () => {
    const slow = () => new Promise<string>((resolve) => setTimeout(() => resolve('answered'), 50));
    expect(await withTimeout(2 ** 31 + 1000, undefined, slow)).toBe('answered');
  });
});
