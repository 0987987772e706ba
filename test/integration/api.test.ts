/** The run API over real HTTP: validation (400 naming fields, nothing written), idempotent creation, views. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { keysAddedSince, keySet } from '../../testkit/keyPrefix.js';

let h: Harness;
let url: string;
beforeAll(async () => {
  h = await createHarness('api');
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

const keys = () => keySet(h.ctx.redis, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
const keysAdded = (before: ReadonlySet<string>) =>
  keysAddedSince(h.ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);

describe('POST /v1/runs', () => {
  it('bad bodies get 400 naming the fields, and nothing is written', async () => {
    const before = await keys();
    const cases: [unknown, string][] = [
      // Neither an agent nor a shorthand field: the named-agent form's errors say what is missing.
      [{ tenant: 'acme' }, 'agent'],
      [
        { tenant: 'acme', ticket: { ...sampleTicket(), customer: { email: 'nope', name: 'A' } } },
        'ticket.customer.email',
      ],
      [{ tenant: 'acme', ticket: sampleTicket(), budget: { maxSteps: -1 } }, 'budget.maxSteps'],
      [{ tenant: 'acme', ticket: sampleTicket(), budget: { maxSteps: 100000 } }, 'budget.maxSteps'],
      [{ tenant: 'acme', ticket: sampleTicket(), agent: { model: 'gpt-x' } }, 'agent.model'],
      [{ tenant: 'acme', ticket: sampleTicket(), extra: 1 }, '(body)'],
      ['{not json', '(body)'],
    ];
    for (const [body, field] of cases) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const json = (await res.json()) as { fields: { path: string }[] };
      expect(json.fields.map((f) => f.path).join(' '), JSON.stringify(body)).toContain(field);
    }
    expect(await keysAdded(before)).toEqual([]);
  });

  it('bad bodies: an unknown nested field is a 400 naming it, deep nesting a 400, an oversized body a 413 naming the limit; nothing is written', async () => {
    const before = await keys();
    const ticket = sampleTicket('B-1');
    const nestedCases: [unknown, string][] = [
      [{ tenant: 'acme', ticket: { ...ticket, priority: 'high' } }, 'ticket'],
      [{ tenant: 'acme', ticket: { ...ticket, customer: { ...ticket.customer, phone: '555' } } }, 'ticket.customer'],
      [
        {
          tenant: 'acme',
          ticket,
          agent: { model: 'scripted', script: [{ toolCalls: [{ name: 'x', args: {}, extra: 1 }] }] },
        },
        'agent.script.0.toolCalls.0',
      ],
      [
        {
          tenant: 'acme',
          ticket,
          agent: {
            model: 'scripted',
            script: [{ final: 'ok', usage: { promptTokens: 1, completionTokens: 1, cost: 3 } }],
          },
        },
        'agent.script.0.usage',
      ],
    ];
    for (const [body, field] of nestedCases) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const json = (await res.json()) as { fields: { path: string; message: string }[] };
      expect(
        json.fields.map((f) => f.path),
        JSON.stringify(body),
      ).toContain(field);
      expect(json.fields.map((f) => f.message).join(' ')).toMatch(/unrecognized key/i);
    }
    const nest = (levels: number) => `${'{"v":'.repeat(levels)}"x"${'}'.repeat(levels)}`;
    for (const levels of [40, 100_000]) {
      const body = JSON.stringify({
        tenant: 'acme',
        ticket,
        agent: { model: 'scripted', script: [{ toolCalls: [{ name: 'send_email', args: { deep: '@' } }] }] },
      }).replace('"@"', nest(levels));
      const res = await post(body);
      expect(res.status, `${levels} levels`).toBe(400);
      expect(JSON.stringify(await res.json())).toContain('nested deeper than 32 levels');
    }
    const big = await post({ tenant: 'acme', ticket: { ...ticket, body: 'x'.repeat(1.1 * 1024 * 1024) } });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: 'too_large', limit: '1mb' });
    expect(await keysAdded(before)).toEqual([]);
  });

  it('a new run gets 201; the same (tenant, ticket.id) or the same Idempotency-Key returns it with 200', async () => {
    const first = await post({ tenant: 'acme', ticket: sampleTicket('A-1') }, { 'idempotency-key': 'req-1' });
    expect(first.status).toBe(201);
    const { runId } = (await first.json()) as { runId: string };
    const again = await post({ tenant: 'acme', ticket: sampleTicket('A-1') });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { runId: string }).runId).toBe(runId);
    const sameKey = await post({ tenant: 'acme', ticket: sampleTicket('A-2') }, { 'idempotency-key': 'req-1' });
    expect(sameKey.status).toBe(200);
    expect(((await sameKey.json()) as { runId: string }).runId).toBe(runId);
    const otherTenant = await post({ tenant: 'other', ticket: sampleTicket('A-1') });
    expect(otherTenant.status).toBe(201);
    expect(
      await h.ctx.queues.forRun(runId).getJobCountByTypes('waiting', 'active', 'completed'),
    ).toBeGreaterThanOrEqual(1);
  });

  it('GET /v1/runs/:id shows status, step, budget, transcript and effects; 404 for an unknown run', async () => {
    await h.startWorker();
    const res = await post({ tenant: 'acme', ticket: sampleTicket('V-1'), budget: { maxSteps: 10 } });
    const { runId } = (await res.json()) as { runId: string };
    await h.waitForStatus(runId, ['completed']);
    const view = (await (await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth })).json()) as Record<
      string,
      any
    >;
    expect(view.status).toBe('completed');
    expect(view.step).toBe(6);
    expect(view.budget.limits.maxSteps).toBe(10);
    expect(view.budget.used.steps).toBe(5);
    expect(view.budget.used.tokens).toBeGreaterThan(0);
    expect(view.transcript.filter((e: { kind: string }) => e.kind === 'decision')).toHaveLength(5);
    expect(view.effects.map((e: { tool: string }) => e.tool)).toEqual(['create_ticket', 'send_email']);
    expect((await fetch(`${url}/v1/runs/r_nope`, { headers: producerAuth })).status).toBe(404);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
  });
});
