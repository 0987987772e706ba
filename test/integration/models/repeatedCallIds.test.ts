/**
 * A model answer whose tool calls share an id (an OpenAI-compatible server, or a team's own provider, that repeats one
 * or gives none): each call runs under an id of its own, so two writes are two actions and two effects, never the
 * second answered by the first's action. Through a team's own provider on an embedded fleet (the step makes the ids
 * distinct) and through the AI SDK over HTTP (the SDK would pair every call of the repeated id with the first one's
 * arguments: src/models/aiSdk.ts makes them distinct before it reads them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFleet, type Fleet } from '../../../src/fleet.js';
import { leadQualifier } from '../../../examples/lead-qualifier/index.js';
import { startCrm, type CrmHandle } from '../../../examples/lead-qualifier/crm.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../../../src/core/model.js';
import type { DecisionEntry, ObservationEntry } from '../../../src/core/journal.js';
import { startOpenAIServer, type ModelServer } from '../../../testkit/modelServers/openai.js';
import { createHarness, producerAuth, type Harness } from '../../../testkit/harness.js';
import { loadConfig } from '../../../src/config/config.js';
import { buildProviders } from '../../../src/server/buildContext.js';

const usage = { promptTokens: 40, completionTokens: 8 };
const deal = (leadId: string) => ({
  name: 'create_deal',
  args: { leadId, company: 'Acme Corp', tier: 'enterprise', amountCents: 100_000 },
});

/** A team's own provider: step 1 opens two deals under one call id (the second with none given), step 2 ends. */
const own: ModelProvider = {
  name: 'own',
  defaultModel: 'own-1',
  needsTranscript: false,
  complete: (req: ModelRequest): Promise<ModelTurn> =>
    Promise.resolve(
      req.step === 1
        ? {
            toolCalls: [
              { id: 'same', ...deal('L-1') },
              { id: 'same', ...deal('L-2') },
              { id: '', ...deal('L-3') },
            ],
            usage,
          }
        : { toolCalls: [], final: 'Three deals.', usage },
    ),
};

let h: Harness;
let crm: CrmHandle;
let compat: ModelServer;
let fleet: Fleet;
let api: string;
beforeAll(async () => {
  h = await createHarness('callids');
  [crm, compat] = await Promise.all([startCrm(), startOpenAIServer()]);
  const config = loadConfig({
    ...h.env,
    OPENAI_COMPATIBLE_BASE_URL: `${compat.url}/v1`,
    OPENAI_COMPATIBLE_MODEL: 'llama-test',
  });
  fleet = await createFleet({
    agents: [leadQualifier({ baseUrl: crm.url })],
    config,
    // The configured providers, and the team's own beside them.
    providers: new Map([...buildProviders(config), ['own', own]]),
  });
  api = (await fleet.api.listen(0, '127.0.0.1')).url;
  fleet.worker.start();
});
afterAll(async () => {
  await fleet.close();
  await Promise.all([crm.close(), compat.close()]);
  await h.close();
});

async function run(
  model: string,
  leadId: string,
): Promise<{ decision: DecisionEntry; observations: ObservationEntry[] }> {
  const res = await fetch(`${api}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify({
      tenant: 'acme',
      agent: 'lead-qualifier',
      model,
      input: { leadId, company: 'Acme Corp', email: 'buyer@acme.example' },
    }),
  });
  expect(res.status).toBe(201);
  const { runId } = (await res.json()) as { runId: string };
  expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
  const transcript = await h.ctx.store.transcript(runId);
  return {
    decision: transcript.find((e): e is DecisionEntry => e.kind === 'decision')!,
    observations: transcript.filter((e): e is ObservationEntry => e.kind === 'observation'),
  };
}

describe('tool calls of one answer that share an id', () => {
  it("a team's own provider: each call is journalled under an id of its own, and each deal is opened", async () => {
    const { decision, observations } = await run('own', 'R-own');
    expect(decision.toolCalls.map((c) => c.id)).toEqual(['same', 'same~2', 'call~3']);
    expect(observations.map((o) => [o.callId, o.status])).toEqual([
      ['same', 'ok'],
      ['same~2', 'ok'],
      ['call~3', 'ok'],
    ]);
    expect(new Set(observations.map((o) => o.actionId)).size).toBe(3);
    expect(
      crm
        .deals()
        .map((d) => d.leadId)
        .filter((id) => id.startsWith('L-')),
    ).toEqual(['L-1', 'L-2', 'L-3']);
  });

  it('an OpenAI-compatible server over HTTP: each call keeps its own arguments', async () => {
    compat.enqueue(
      {
        kind: 'turn',
        toolCalls: [
          { id: 'call_0', ...deal('M-1') },
          { id: 'call_0', ...deal('M-2') },
        ],
        usage: { input: 50, output: 9 },
      },
      { kind: 'turn', text: 'Two deals.', usage: { input: 80, output: 3 } },
    );
    const { decision, observations } = await run('openai-compatible', 'R-compat');
    expect(decision.toolCalls.map((c) => [c.id, (c.args as { leadId: string }).leadId])).toEqual([
      ['call_0', 'M-1'],
      ['call_0~2', 'M-2'],
    ]);
    expect(observations.map((o) => o.status)).toEqual(['ok', 'ok']);
    expect(
      crm
        .deals()
        .map((d) => d.leadId)
        .filter((id) => id.startsWith('M-')),
    ).toEqual(['M-1', 'M-2']);
  });
});
