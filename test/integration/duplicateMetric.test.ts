/**
 * A duplicate forced through a key-ignoring service is found by reconciliation
 * and counted in agent_duplicate_writes_total; the ledger's dedupe of a repeated
 * request is counted in agent_ledger_dedupe_hits_total; a clean run moves neither.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness, supportTool } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import type { WriteTool } from '../../src/core/tool.js';

const u = { promptTokens: 10, completionTokens: 5 };
const emailArgs = { to: 'ada@example.com', template: 'ack', subject: 'Re', body: 'On it.' };
const email = { toolCalls: [{ name: 'send_email', args: emailArgs }], usage: u, transientFailures: 0 };
const final = { toolCalls: [], final: 'done', usage: u, transientFailures: 0 };

let h: Harness;
let api: string;
beforeAll(async () => {
  h = await createHarness('dupmetric');
  await h.startWorker();
  api = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

/** Reads one sample from the API's /metrics text (Prometheus exposition format). */
async function sample(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${api}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('duplicate-write metric', () => {
  it('a clean run leaves the duplicate counter at zero', async () => {
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('DM-clean'), agent: { model: 'scripted', script: [email, final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    await h.waitForStatus(spec.runId, ['completed']);
    expect(await sample('agent_duplicate_writes_total', 'tool="send_email"')).toBe(0);
  });

  it('a second effect for one action, found by reconciliation, moves the duplicate counter by 1; a repeat moves dedupe by 1', async () => {
    const ticketArgs = { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'DM-dup' };
    const ticketTurn = { toolCalls: [{ name: 'create_ticket', args: ticketArgs }], usage: u, transientFailures: 0 };
    const spec = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket('DM-dup'),
        agent: { model: 'scripted', script: [ticketTurn, ticketTurn, final] },
      },
      Date.now(),
    );
    const tool = supportTool(h.ctx, 'create_ticket') as WriteTool;
    const id = actionIdentity(spec.runId, tool, ticketArgs);
    // Another sender already created this action's ticket (same key, same external_id), and the service
    // ignores keys: the run's create lands a second ticket, and its answer is lost.
    const ctx = { runId: spec.runId, step: 1, signal: new AbortController().signal, input: spec.input };
    await tool.dispatch(ticketArgs, ctx, {
      actionId: id.actionId,
      idempotencyKey: id.idempotencyKey,
      requestId: 'rq_other',
      timeoutMs: 5000,
      signal: ctx.signal,
    });
    h.sandbox.setFaults([
      { kind: 'ignore_keys', resource: 'tickets' },
      { kind: 'lost_response_after_commit', resource: 'tickets', count: 1 },
    ]);
    const dupBefore = await sample('agent_duplicate_writes_total', 'tool="create_ticket"');
    const dedupeBefore = await sample('agent_ledger_dedupe_hits_total', 'tool="create_ticket"');
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'needs_human'])).toBe('completed');
    // Zendesk's list by external_id shows both tickets: the reconciliation counts the second one.
    expect(h.sandbox.counts().byResource.tickets.byKey[id.idempotencyKey]).toBe(2);
    expect((await sample('agent_duplicate_writes_total', 'tool="create_ticket"')) - dupBefore).toBe(1);
    expect((await sample('agent_ledger_dedupe_hits_total', 'tool="create_ticket"')) - dedupeBefore).toBe(1);
  });
});
