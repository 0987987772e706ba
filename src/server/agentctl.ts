/**
 * agentctl: the operator's command line over the HTTP API.
 *
 *   agentctl runs [--status S] [--tenant T] [--agent A] [--since T] [--until T] [--limit N] [--cursor C]
 *                                                       runs, newest status change first (nextCursor pages on);
 *                                                       --since/--until: last status change, epoch ms or ISO 8601
 *   agentctl approvals                                  pending approvals (exact args, fingerprint, expiry)
 *   agentctl approve|reject <actionId> --fingerprint F   (recorded under the token's operator; --as is ignored)
 *   agentctl reconciliations                            the human queue with evidence
 *   agentctl resolve <actionId> confirmed|not_sent|compensate [--receipt R] [--evidence JSON]
 *   agentctl cancel <runId>
 *   agentctl retry <runId> [--steps N] [--tokens N] [--wall-ms N]
 * a failed / budget_exceeded / needs_human run goes on from its last commit
 * xceeded / needs_human run goes on from its last commit
 *   agentctl versions [list] [--limit N]                runs parked for a version change, with the versions served
 *   agentctl versions continue <runId> [--to VERSION] [--tools-hash H]   re-pin to a served version and resume
 *   agentctl versions cancel <runId>                    cancel a run of the version queue
 * agentctl flow                                       flow control: each tenant's line and share, agents, rate limits,
 * s, changes
 * agentctl flow tenant <tenant> [--weight W] [--limit N]   change a tenant's weight or limit at run time ('default':
 * ': back to config)
 *   agentctl flow agent <agent> --limit N               change an agent's concurrency limit at run time
 *   agentctl spend [--period YYYY-MM-DD|YYYY-MM]        model spend by tenant, agent and model (µ$; default today)
 *   agentctl run <runId>                                the run view
 *   agentctl events <runId> [--from EVENT_ID]           live events (SSE), resumable after an event's id
 *
 * --url (default $AGENTCTL_URL or http://127.0.0.1:3000) and --token (default $OPERATOR_TOKEN).
 * Exit code 0 on a 2xx answer, 1 otherwise; the answer is printed as JSON.
 */
import { parseArgs } from 'node:util';
import { withTimeout } from '../core/timeout.js';
import { isActionId, isRunId } from '../store/keys.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    fingerprint: { type: 'string' },
    as: { type: 'string' },
    receipt: { type: 'string' },
    evidence: { type: 'string' },
    from: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    steps: { type: 'string' },
    tokens: { type: 'string' },
    'wall-ms': { type: 'string' },
    status: { type: 'string' },
    tenant: { type: 'string' },
    agent: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
    to: { type: 'string' },
    'tools-hash': { type: 'string' },
    weight: { type: 'string' },
    period: { type: 'string' },
  },
});

// A client process: its two settings come from flags or the environment here, nowhere else.
const base = (values.url ?? process.env.AGENTCTL_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
const token = values.token ?? process.env.OPERATOR_TOKEN;
const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };

function usage(message?: string): never {
  if (message) console.error(message);
  console.error(
    'usage: agentctl runs [--status S] [--tenant T] [--agent A] [--since T] [--until T] [--limit N] [--cursor C] | approvals | approve|reject <actionId> --fingerprint F | reconciliations |\n' +
      '       resolve <actionId> confirmed|not_sent|compensate [--receipt R] [--evidence JSON] |\n' +
      '       cancel <runId> | retry <runId> [--steps N] [--tokens N] [--wall-ms N] | run <runId> | events <runId> [--from ID] |\n' +
      '       versions [list] [--limit N] | versions continue <runId> [--to VERSION] [--tools-hash H] | versions cancel <runId> |\n' +
      '       flow | flow tenant <tenant> [--weight W] [--limit N] | flow agent <agent> --limit N   [--url U] [--token T]',
  );
  process.exit(2);
}

function need(value: string | undefined, what: string): string {
  if (!value) usage(`missing ${what}`);
  return value;
}

/** A request the API does not answer fails instead of hanging the command (event streams have no limit). */
const REQUEST_TIMEOUT_MS = 30_000;

async function request(method: string, path: string, body?: unknown): Promise<void> {
  const { res, text } = await withTimeout(REQUEST_TIMEOUT_MS, undefined, async (signal) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      signal,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { res, text: await res.text() };
  });
  console.log(text);
  process.exitCode = res.ok ? 0 : 1;
}

/** The day's or month's model spend (GET /v1/spend), by tenant, agent and model. */
async function spend(period: string | undefined): Promise<void> {
  await request('GET', `/v1/spend${period === undefined ? '' : `?period=${encodeURIComponent(period)}`}`);
}

async function events(runId: string, from: string | undefined): Promise<void> {
  let last = from;
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      const res = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/events`, {
        headers: { ...headers, ...(last ? { 'last-event-id': last } : {}) },
      });
      if (!res.ok) return void (await request('GET', `/v1/runs/${encodeURIComponent(runId)}/events`));
      const decoder = new TextDecoder();
      let buf = '';
      for await (const chunk of res.body!) {
        buf += decoder.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const id = /^id: (.*)$/m.exec(block)?.[1];
          if (id) last = id;
          if (!block.startsWith(':')) console.log(block.replace(/\n/g, '  '));
        }
      }
      return; // the server ended the stream: the run finished
    } catch (err) {
      console.error(`stream interrupted (${(err as Error).message}); resuming after ${last ?? 'the start'}`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
    }
  }
  process.exitCode = 1;
}

const [command, a, b] = positionals;
const VERSION_QUEUE = '/v1/operators/version-mismatches';
if (values.help || !command) usage();
/** Ids are checked by format here too: a malformed one never reaches the server. */
const id = (x: string | undefined, what: 'runId' | 'actionId') => {
  const value = need(x, what);
  if (!(what === 'runId' ? isRunId(value) : isActionId(value)))
    usage(
      `${what} ${JSON.stringify(value)} is malformed (${what === 'runId' ? 'r_ + 24 hex digits' : 'a_ + 32 hex digits'})`,
    );
  return encodeURIComponent(value);
};
switch (command) {
  case 'runs': {
    const query = new URLSearchParams();
    for (const f of ['status', 'tenant', 'agent', 'since', 'until', 'limit', 'cursor'] as const)
      if (values[f] !== undefined) query.set(f, values[f]);
    const qs = query.toString();
    await request('GET', `/v1/runs${qs ? `?${qs}` : ''}`);
    break;
  }
  case 'approvals':
    await request('GET', '/v1/approvals');
    break;
  case 'approve':
  case 'reject':
    await request('POST', `/v1/approvals/${id(a, 'actionId')}`, {
      decision: command,
      fingerprint: need(values.fingerprint, '--fingerprint'),
    });
    break;
  case 'reconciliations':
    await request('GET', '/v1/reconciliations');
    break;
  case 'resolve':
    await request('POST', `/v1/reconciliations/${id(a, 'actionId')}`, {
      finding: need(b, 'finding'),
      evidence: values.evidence ? (JSON.parse(values.evidence) as unknown) : {},
      ...(values.receipt ? { receipt: values.receipt } : {}),
    });
    break;
  case 'cancel':
    await request('POST', `/v1/runs/${id(a, 'runId')}/cancel`, {});
    break;
  case 'retry': {
    // Numbers as typed: the server validates them (400 naming the field), so the rules live in one place.
    const ext = { steps: values.steps, tokens: values.tokens, wallMs: values['wall-ms'] };
    const body = Object.fromEntries(
      Object.entries(ext)
        .filter(([, v]) => v !== undefined)
        .map(([f, v]) => [f, /^\d+$/.test(v!) ? Number(v) : v]),
    );
    await request('POST', `/v1/runs/${id(a, 'runId')}/retry`, body);
    break;
  }
  case 'run':
    await request('GET', `/v1/runs/${id(a, 'runId')}`);
    break;
  case 'events':
    await events(decodeURIComponent(id(a, 'runId')), values.from);
    break;
  case 'versions':
    if (a === undefined || a === 'list') {
      await request(
        'GET',
        `${VERSION_QUEUE}${values.limit !== undefined ? `?limit=${encodeURIComponent(values.limit)}` : ''}`,
      );
    } else if (a === 'continue') {
      await request('POST', `${VERSION_QUEUE}/${id(b, 'runId')}/continue`, {
        ...(values.to !== undefined ? { agentVersion: values.to } : {}),
        ...(values['tools-hash'] !== undefined ? { toolsHash: values['tools-hash'] } : {}),
      });
    } else if (a === 'cancel') {
      await request('POST', `${VERSION_QUEUE}/${id(b, 'runId')}/cancel`, {});
    } else {
      usage(`unknown versions command ${a}`);
    }
    break;
  case 'flow': {
    // Values as typed ('default' = back to the configured value): the server validates them, naming the field.
    const value = (v: string | undefined) =>
      v === undefined ? undefined : v === 'default' ? null : Number.isFinite(Number(v)) ? Number(v) : v;
    if (a === undefined) await request('GET', '/v1/flow');
    else if (a === 'tenant') {
      await request('PUT', `/v1/flow/tenants/${encodeURIComponent(need(b, 'tenant'))}`, {
        weight: value(values.weight),
        limit: value(values.limit),
      });
    } else if (a === 'agent') {
      await request('PUT', `/v1/flow/agents/${encodeURIComponent(need(b, 'agent'))}`, {
        limit: value(need(values.limit, '--limit')),
      });
    } else usage(`unknown flow command ${a}`);
    break;
  }
  case 'spend':
    await spend(values.period);
    break;
  default:
    usage(`unknown command ${command}`);
}
