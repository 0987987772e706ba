/**
 * FleetClient.createRun without an Idempotency-Key against the real API: a producer whose call threw Unreachable (every
 * answer lost on the way back) and that calls again with the same body gets the run the lost answers named, for both
 * body forms (a named agent with its input, and the support agent's shorthand), even once that run has ended: one run
 * of the subject, never a follow-up that does the work again. A key the caller gives still names the request: a new
 * one on the subject is a follow-up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FleetClient, Unreachable, type CreateRunRequest, type RunCreated } from '../../src/client/index.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';
import { final } from '../../testkit/turns.js';

let h: Harness;
let url: string;

beforeAll(async () => {
  h = await createHarness('clientIntake');
  await h.startWorker();
  ({ url } = await h.startApi());
});
afterAll(async () => {
  await h?.close();
});

/** A fetch that forwards each request to the API and, while `drop` is set, loses the answer on the way back. */
function losingAnswers() {
  const lost: { key: string | null; status: number; body: RunCreated }[] = [];
  const sent: (string | null)[] = []; // each POST's Idempotency-Key
  const state = { drop: true };
  const fetchFn: typeof fetch = async (input, init) => {
    const key = new Headers(init?.headers).get('idempotency-key');
    if (init?.method === 'POST') sent.push(key);
    const res = await fetch(input, init);
    if (!state.drop) return res;
    lost.push({ key, status: res.status, body: (await res.json()) as RunCreated });
    throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
  };
  return { lost, sent, state, fetchFn };
}

let seq = 0;
const ticketId = () => `CI-${++seq}-${Date.now()}`;

async function runsOfSubject(client: FleetClient, subject: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const r of client.searchRuns({ tenant: 'acme', subject })) ids.push(r.runId);
  return ids;
}

describe('createRun without an Idempotency-Key', () => {
  const forms: [string, (id: string) => CreateRunRequest][] = [
    [
      'a named agent with its input',
      (id) => ({ tenant: 'acme', agent: 'support', input: sampleTicket(id), model: 'scripted', script: [final] }),
    ],
    [
      "the support agent's shorthand",
      (id) => ({ tenant: 'acme', ticket: sampleTicket(id), agent: { model: 'scripted', script: [final] } }),
    ],
  ];

  it.each(forms)(
    '%s: called again after Unreachable, the same body is the run the lost answers named',
    async (_name, body) => {
      const id = ticketId();
      const wire = losingAnswers();
      const client = new FleetClient({
        url,
        token: PRODUCER_TOKEN,
        fetch: wire.fetchFn,
        retry: { attempts: 3, baseDelayMs: 5 },
      });
      const err = await client.createRun(body(id)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Unreachable);
      // The call's own attempts, each one answered with the same run.
      expect(wire.lost).toHaveLength(3);
      expect(wire.lost.map((l) => l.status)).toEqual([201, 200, 200]);
      const runId = wire.lost[0]!.body.runId;
      expect(new Set(wire.lost.map((l) => l.body.runId))).toEqual(new Set([runId]));
      expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');

      // The producer's own retry, after the run has ended: the same run, not a follow-up.
      wire.state.drop = false;
      const again = await client.createRun(body(id));
      expect(again).toMatchObject({ runId, created: false, status: 'completed' });
      expect(again.previousRunId).toBeUndefined();
      expect(await runsOfSubject(client, id)).toEqual([runId]);
      // No key was sent: the API answered each request with the subject's run.
      expect(wire.sent).toEqual([null, null, null, null]);
    },
  );

  it('a key the caller gives still names the request: a new key on the subject is a follow-up', async () => {
    const id = ticketId();
    const client = new FleetClient({ url, token: PRODUCER_TOKEN });
    const body = forms[0]![1](id);
    const first = await client.createRun(body);
    expect(first.created).toBe(true);
    await h.waitForStatus(first.runId, ['completed', 'failed']);
    const next = await client.createRun(body, { idempotencyKey: `evt-${id}-2` });
    expect(next).toMatchObject({ created: true, previousRunId: first.runId });
    expect(await client.createRun(body, { idempotencyKey: `evt-${id}-2` })).toMatchObject({
      runId: next.runId,
      created: false,
    });
    await h.waitForStatus(next.runId, ['completed', 'failed']);
    expect((await runsOfSubject(client, id)).sort()).toEqual([first.runId, next.runId].sort());
  });
});
