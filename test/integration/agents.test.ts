/**
 * Runs are created for a named agent and executed by the agent the worker has
 * under that name: the named-agent body and the support shorthand are one
 * intake, the input is validated by the agent's schema, a worker without the
 * run's agent (or with another version of it) hands the run to a person, and
 * compensation is the agent's rule or a person's job.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { runIdFor } from '../../src/store/keys.js';
import { defineAgent, defineReadTool, defineWriteTool } from '../../src/core/agent.js';
import { CompensationRefused, compensationCall } from '../../src/ledger/compensation.js';
import type { ActionRecord } from '../../src/ledger/ledger.js';
import type { RunSpec } from '../../src/runs/spec.js';
import { final } from '../../testkit/turns.js';
import { readRunEvents } from '../../testkit/runEvents.js';

let h: Harness;
let url: string;
beforeAll(async () => {
  h = await createHarness('agents');
  url = (await h.startApi()).url;
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

const post = async (body: unknown) => {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('POST /v1/runs for a named agent', () => {
  it('validates the input with the agent schema (a 400 naming input.<field>, nothing written) and refuses an agent the deployment does not run', async () => {
    const bad = await post({
      tenant: 'acme',
      agent: 'support',
      input: { ...sampleTicket('AG-BAD'), customer: { email: 'nope', name: 'A' } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.fields).toEqual([{ path: 'input.customer.email', message: expect.any(String) }]);
    expect(await h.ctx.store.exists(runIdFor('acme', 'support', 'AG-BAD'))).toBe(false);
    const ghost = await post({ tenant: 'acme', agent: 'ghost', input: {} });
    expect(ghost.status).toBe(400);
    expect(ghost.body.fields).toEqual([
      { path: 'agent', message: "agent 'ghost' is not run by this deployment (it runs: support)" },
    ]);
    const model = await post({ tenant: 'acme', agent: 'support', input: sampleTicket('AG-M'), model: 'gpt-x' });
    expect(model.body.fields).toEqual([
      {
        path: 'model',
        message: expect.stringMatching(/^provider 'gpt-x' is not enabled \(from model; no such provider/),
      },
    ]);
  });

  it('the named-agent body and the support shorthand are one intake: the same tenant, agent and key is the same run', async () => {
    const named = await post({
      tenant: 'acme',
      agent: 'support',
      input: sampleTicket('AG-1'),
      model: 'scripted',
      script: [final],
    });
    expect(named.status).toBe(201);
    expect(named.body.runId).toBe(runIdFor('acme', 'support', 'AG-1'));
    const shorthand = await post({ tenant: 'acme', ticket: sampleTicket('AG-1') });
    expect(shorthand).toMatchObject({ status: 200, body: { runId: named.body.runId, created: false } });
    expect(await h.waitForStatus(named.body.runId as string, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const spec = await h.ctx.store.readSpec(named.body.runId as string);
    expect(spec).toMatchObject({
      v: 2,
      agent: 'support',
      key: 'AG-1',
      agentVersion: 'support-agent@2',
      toolsHash: '3bf043fb192e9083',
      input: sampleTicket('AG-1'),
    });
  });
});

describe('the worker resolves the run agent by name', () => {
  const createWith = async (id: string, change: (spec: RunSpec) => RunSpec) => {
    const spec = change(
      buildSpec(
        h.ctx,
        { tenant: 'acme', ticket: sampleTicket(id), agent: { model: 'scripted', script: [final] } },
        Date.now(),
      ),
    );
    await h.ctx.store.create(spec, Date.now());
    return spec.runId;
  };

  it('an agent it does not run: needs_human "unknown_agent: <name>", with its event and metric', async () => {
    const runId = await createWith('AG-GHOST', (s) => ({ ...s, agent: 'ghost' }));
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toBe('unknown_agent: ghost');
    const events = (await readRunEvents(h.ctx, runId)).map((e) => `${e.type} ${e.data}`);
    expect(events.some((e) => e.includes('unknown_agent: ghost'))).toBe(true);
    const finished = (await h.ctx.metrics.registry.getSingleMetric('agent_runs_finished_total')?.get())?.values ?? [];
    expect(
      finished.some((v) => v.labels.status === 'needs_human' && String(v.labels.reason).startsWith('unknown_agent')),
    ).toBe(true);
  });

  it('another version of the agent: needs_human version_mismatch, as for changed tools', async () => {
    const runId = await createWith('AG-OLD', (s) => ({ ...s, agentVersion: 'support-agent@0' }));
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('needs_human');
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(
      /^version_mismatch: pinned support-agent@0\/[0-9a-f]{16} served support-agent@2\/[0-9a-f]{16}$/,
    );
  });
});

describe("compensation is the agent's rule", () => {
  const args = z.object({ to: z.string() }).strict();
  const write = defineWriteTool({
    name: 'notify',
    description: 'n',
    args,
    service: { enforcesKey: true, reconcile: 'none' },
    dispatch: async () => ({ receipt: 'r', output: {}, replayed: false }),
  });
  const read = defineReadTool({ name: 'peek', description: 'p', args: z.object({}), execute: async () => ({}) });
  const base = {
    name: 'notifier',
    version: 'n@1',
    input: z.object({ to: z.string() }),
    tools: [read, write],
    instructions: () => '',
  };
  const original = { actionId: 'a_1', tool: 'notify', args: { to: 'x' } } as ActionRecord;
  const spec = { agent: 'notifier', input: { to: 'x' } } as RunSpec;
  const refusal = (agent: Parameters<typeof compensationCall>[2]) => {
    try {
      compensationCall(original, spec, agent);
    } catch (err) {
      expect(err).toBeInstanceOf(CompensationRefused);
      return (err as Error).message;
    }
    throw new Error('not refused');
  };

  it('the call the agent gives, its arguments checked by the tool schema', () => {
    const agent = defineAgent({
      ...base,
      compensationFor: (a, input) => ({ tool: 'notify', args: { to: `${input.to}:${a.actionId}` } }),
    });
    expect(compensationCall(original, spec, agent)).toEqual({ tool: agent.tools.get('notify'), args: { to: 'x:a_1' } });
  });

  it('refused, left to a person: no rule, undefined, a read tool, arguments the tool refuses, an agent not run here', () => {
    expect(refusal(defineAgent(base))).toMatch(/has no compensation for notify/);
    expect(refusal(defineAgent({ ...base, compensationFor: () => undefined }))).toMatch(/has no compensation/);
    expect(refusal(defineAgent({ ...base, compensationFor: () => ({ tool: 'peek', args: {} }) }))).toMatch(
      /not one of its write tools/,
    );
    expect(refusal(defineAgent({ ...base, compensationFor: () => ({ tool: 'notify', args: { to: 1 } }) }))).toMatch(
      /arguments 'notify' refuses/,
    );
    expect(refusal(undefined)).toMatch(/not run by this process/);
  });
});
