/**
 * Shared helpers of the operator tests: a harness with an operator token and approval rules, JSON over HTTP, and the
 * agentctl command run as an operator would.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { buildSpec } from '../../../src/producer/intake.js';
import { createEffectRunner } from '../../../src/ledger/runner.js';
import { approvalPolicy } from '../../../src/ledger/approvals.js';
import type { Script } from '../../../src/models/scriptedTurns.js';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { moduleArgs } from '../../../testkit/spawnModule.js';

export const OPERATOR_TOKEN = 'operator-token-for-tests';
// The operator tests' turns and calls are the engine tests' own (testkit/turns.ts).
export { final, turn, emailCall as email, refundCall as refund } from '../../../testkit/turns.js';

export async function operatorHarness(
  name: string,
  env: Record<string, string> = {},
): Promise<Harness & { url: string }> {
  const h = await createHarness(name, {
    OPERATOR_TOKEN,
    APPROVAL_RULES: JSON.stringify([{ tool: 'refund', minAmountCents: 5000 }]),
    ...env,
  });
  await h.startWorker({ effects: createEffectRunner(h.ctx, { approvals: approvalPolicy(h.cfg.APPROVAL_RULES) }) });
  const { url } = await h.startApi();
  return Object.assign(h, { url });
}

let seq = 0;
export async function startScripted(h: Harness, script: Script, ticketPrefix = 'OP'): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`${ticketPrefix}-${++seq}-${Date.now()}`),
      agent: { model: 'scripted', script },
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

export async function call<T = Record<string, unknown>>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  token: string | undefined = OPERATOR_TOKEN,
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as T };
}

const exec = promisify(execFile);

/** `agentctl <args> --url <url> --token <token>` in its own process: its exit code, stdout and stderr. */
export function agentctl(url: string, token = OPERATOR_TOKEN) {
  return async (...args: string[]): Promise<{ code: number; out: string; err: string }> => {
    try {
      const { stdout, stderr } = await exec(process.execPath, [
        ...moduleArgs('src/server/agentctl'),
        ...args,
        '--url',
        url,
        '--token',
        token,
      ]);
      return { code: 0, out: stdout, err: stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, out: e.stdout, err: e.stderr };
    }
  };
}
