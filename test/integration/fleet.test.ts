/**
 * createFleet (the public entry, src/index.ts): a team's agents in one process,
 * the same api, worker and reconciler the entry points start.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFleet, type Fleet } from '../../src/fleet.js';
import { leadQualifier } from '../../examples/lead-qualifier/index.js';
import { startCrm, type CrmHandle } from '../../examples/lead-qualifier/crm.js';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';

let h: Harness;
let crm: CrmHandle;
let fleet: Fleet;
beforeAll(async () => {
  h = await createHarness('fleet');
  crm = await startCrm();
  fleet = await createFleet({ agents: [leadQualifier({ baseUrl: crm.url })], config: h.env });
});
afterAll(async () => {
  await fleet.close();
  await crm.close();
  await h.close();
});

describe('createFleet', () => {
  it('serves the API, runs the agent on its worker, sweeps with its reconciler', async () => {
    const { url } = await fleet.api.listen(0, '127.0.0.1');
    fleet.worker.start();
    const reconciler = fleet.reconciler.start();
    expect(fleet.agents).toEqual(['lead-qualifier']);
    const res = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...producerAuth },
      body: JSON.stringify({
        tenant: 'acme',
        agent: 'lead-qualifier',
        input: { leadId: 'F-1', company: 'Tiny Shop', email: 'owner@tiny.example' },
      }),
    });
    expect(res.status).toBe(201);
    const { runId } = (await res.json()) as { runId: string };
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(crm.deals()).toHaveLength(1);
    expect((await reconciler.sweep()).examined).toBe(0);
  });
});
