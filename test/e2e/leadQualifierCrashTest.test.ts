/**
 * The example agent as a team would test it: its CRM stand-in counts deals per
 * Idempotency-Key, and the crash-test kit kills a worker at every crash point
 * of the deal step. Every case: one deal and a completed run.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { crashTest } from '../../testkit/crashTest.js';
import { redisUrl } from '../../testkit/harness.js';
import { startCrm, type CrmHandle } from '../../examples/lead-qualifier/crm.js';
import { leadQualifier } from '../../examples/lead-qualifier/index.js';

let crm: CrmHandle;
beforeEach(async () => {
  crm = await startCrm();
});
afterEach(async () => {
  await crm.close();
});

it('create_deal through every crash point: exactly once', { timeout: 600_000 }, async () => {
  const lead = { leadId: 'L-CT', company: 'Acme Corp', email: 'buyer@acme.example' };
  const script = leadQualifier({ baseUrl: crm.url }).demoScript!(lead);
  const report = await crashTest({
    agentsModule: 'examples/lead-qualifier/index.ts',
    input: lead,
    script,
    redisUrl: redisUrl(),
    service: { env: { CRM_URL: crm.url }, effects: () => crm.effectsByKey() },
  });
  expect(report.failures, report.summary()).toEqual([]);
  // Seven step points at the create_deal step, and the answer killed mid-stream.
  expect(report.cases.map((c) => `${c.tool} ${c.point}@${c.step}: ${c.verdict}`)).toHaveLength(8);
  expect(new Set(report.cases.map((c) => c.verdict))).toEqual(new Set(['exactly_once']));
});
