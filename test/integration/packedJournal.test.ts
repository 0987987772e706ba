/**
 * An ended run's journal is packed into one string (src/runs/compact.ts, compactRun-5.lua; read by
 * src/store/runJournal.ts): every reader gets the same entries at the same positions as from the list (the run view
 * over HTTP, the store's transcript and its entry by index, the replay harness, the archive's snapshot), an
 * operator's entry after the end follows the packed ones and expires with the run, and a retry puts the journal back
 * into the list in the same change that puts the run back to work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { Compactor } from '../../src/runs/compactor.js';
import { buildSpec } from '../../src/producer/intake.js';
import { replayRun } from '../../src/runs/replay.js';
import { runView } from '../../src/http/runView.js';
import { snapshotRun } from '../../src/archive/snapshot.js';
import { ledgerFor } from '../../src/ledger/ledger.js';
import {
  DEFLATE_MARKER,
  decodeEntry,
  encodeEntry,
  packEntry,
  unpackJournal,
  type JournalEntry,
} from '../../src/core/journal.js';
import { read, turn, usage } from '../../testkit/turns.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { LONG_FINAL_ANSWER, LONG_TICKET_BODY } from '../fixtures/longTranscript.js';
import type { FleetWorker } from '../../src/worker/fleetWorker.js';

const OPERATOR_TOKEN = 'operator-token-for-packed-journal';
let h: Harness;
let url: string;
let worker: FleetWorker | undefined;
beforeAll(async () => {
  h = await createHarness('pjournal', { OPERATOR_TOKEN, RUN_RETENTION_MS: '3600000' });
  worker = await h.startWorker();
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

const body = LONG_TICKET_BODY;
const answer = LONG_FINAL_ANSWER;
const script: Script = [read, read, { ...turn([], { final: answer }), usage }];

async function createRun(id: string, maxSteps = 10): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: { ...sampleTicket(id), body },
      budget: { maxSteps },
      agent: { model: 'scripted', script },
    },
    Date.now(),
  );
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  return spec.runId;
}

const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded'];
const packed = (runId: string) => h.ctx.redis.exists(h.ctx.keys.run(runId).journalPacked);

/** Every reader's journal of the run: the store's transcript and entries by index, the API's, the archive's. */
async function readers(runId: string) {
  const transcript = await h.ctx.store.transcript(runId);
  const byIndex = await Promise.all([...transcript.keys(), -1].map((i) => h.ctx.store.journalEntry(runId, i)));
  const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
  expect(res.status).toBe(200);
  const view = (await res.json()) as { transcript: JournalEntry[]; notes?: string[] };
  expect(view.notes).toBeUndefined();
  const snap = await snapshotRun(h.ctx, runId, (id) => runView(h.ctx, id, (r) => ledgerFor(h.ctx).listForRun(r)));
  return { transcript, byIndex, api: view.transcript, archive: (snap!.row.view as { transcript: unknown }).transcript };
}

describe("an ended run's packed journal", () => {
  let runId: string;
  beforeAll(async () => {
    runId = await createRun(`PJ-1-${Date.now()}`);
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    // Packed by the reconciler's compactor, which the ending commit queued it for (src/runs/compactor.ts).
    await new Compactor(h.ctx).drain();
    expect(await packed(runId)).toBe(1);
  });

  it('is one string, the list gone, with the run TTL', async () => {
    const k = h.ctx.keys.run(runId);
    expect(await h.ctx.redis.exists(k.journal)).toBe(0);
    expect(await h.ctx.redis.pttl(k.journalPacked)).toBeGreaterThan(0);
    expect(unpackJournal(await h.ctx.redis.getBuffer(k.journalPacked))).toHaveLength(6);
  });

  it('reads back identically through the store, the API, the replay and the archive snapshot', async () => {
    const k = h.ctx.keys.run(runId);
    const fromPacked = await readers(runId);
    const written = fromPacked.transcript;
    expect(written.map((e) => e.kind)).toEqual([
      'decision',
      'observation',
      'decision',
      'observation',
      'decision',
      'status',
    ]);
    expect(written.filter((e) => e.kind === 'observation').map((o) => (o.output as { body: string }).body)).toEqual([
      body,
      body,
    ]);
    expect(written.find((e) => e.kind === 'decision' && e.final !== undefined)).toMatchObject({ final: answer });
    expect(fromPacked.byIndex).toEqual([...written, written.at(-1)]);
    expect(fromPacked.api).toEqual(JSON.parse(JSON.stringify(written)));
    expect(fromPacked.archive).toEqual(fromPacked.api);
    const spec = (await h.ctx.store.readSpec(runId))!;
    const agent = h.ctx.agents.get('support')!;
    const replay = (journal: JournalEntry[]) =>
      replayRun(spec, journal, {
        completionCap: h.cfg.COMPLETION_TOKEN_CAP,
        inputTokens: agent.estimateInputTokens(spec.input),
        tools: agent.tools.specs,
      });
    expect(replay(written)).toMatchObject({ completed: true, stepsReplayed: 3 });

    // The list form, as the worker wrote it (each entry alone, long ones compressed), reads the same everywhere.
    const entries = unpackJournal(await h.ctx.redis.getBuffer(k.journalPacked));
    await h.ctx.redis
      .multi()
      .del(k.journalPacked)
      .rpush(k.journal, ...entries.map(packEntry))
      .exec();
    const listed = await h.ctx.redis.lrangeBuffer(k.journal, 0, -1);
    expect(listed.filter((r) => r[0] === DEFLATE_MARKER)).toHaveLength(3);
    expect(listed.map((r, i) => decodeEntry(r, i))).toEqual(written);
    expect(await readers(runId)).toEqual(fromPacked);

    // Packed again: the same.
    expect((await h.ctx.store.compactEnded(runId)).run).toBe(true);
    expect(await h.ctx.redis.exists(k.journal)).toBe(0);
    expect(await readers(runId)).toEqual(fromPacked);
    expect(replay(await h.ctx.store.transcript(runId))).toEqual(replay(written));
  });

  it("an operator's entry after the end follows the packed ones and expires with the run", async () => {
    const k = h.ctx.keys.run(runId);
    const before = await h.ctx.store.transcript(runId);
    await h.ctx.store.recordOperatorAction(runId, { action: 'resolve', by: 'ann', at: 1, detail: 'confirmed' });
    const after = await h.ctx.store.transcript(runId);
    expect(after.slice(0, -1)).toEqual(before);
    expect(after.at(-1)).toMatchObject({ kind: 'operator', action: 'resolve', by: 'ann', step: 4 });
    expect(await h.ctx.store.journalEntry(runId, before.length)).toEqual(after.at(-1));
    expect(await h.ctx.store.journalEntry(runId, -2)).toEqual(before.at(-1));
    // The list it started carries the run's TTL: nothing of an ended run outlives it.
    expect(await h.ctx.redis.pttl(k.journal)).toBeGreaterThan(0);
    // A compaction takes it in.
    expect((await h.ctx.store.compactEnded(runId)).run).toBe(true);
    expect(await h.ctx.redis.exists(k.journal)).toBe(0);
    expect(await h.ctx.store.transcript(runId)).toEqual(after);
  });

  it('a retry unpacks it into the list in the same change, and the run goes on from there', async () => {
    const stopped = await createRun(`PJ-2-${Date.now()}`, 1);
    expect(await h.waitForStatus(stopped, ENDED)).toBe('budget_exceeded');
    await new Compactor(h.ctx).drain();
    expect(await packed(stopped)).toBe(1);
    const k = h.ctx.keys.run(stopped);
    const before = await h.ctx.store.transcript(stopped);
    expect(before.map((e) => e.kind)).toEqual(['decision', 'observation', 'status']);

    // No worker: the journal as the retry left it.
    await worker!.stop();
    worker = undefined;
    const res = await fetch(`${url}/v1/runs/${stopped}/retry`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: JSON.stringify({ steps: 5 }),
    });
    expect(res.status).toBe(200);
    expect(await h.ctx.redis.exists(k.journalPacked)).toBe(0);
    const listed = await h.ctx.redis.lrangeBuffer(k.journal, 0, -1);
    // Each entry as the worker stores it (the long observation compressed), the retry's own entry last.
    expect(listed.map((r) => r[0] === DEFLATE_MARKER)).toEqual([false, true, false, false]);
    const reopened = listed.map((r, i) => decodeEntry(r, i));
    expect(reopened.slice(0, 3)).toEqual(before);
    expect(reopened[3]).toMatchObject({ kind: 'operator', action: 'retry', by: 'operator' });
    expect(await h.ctx.redis.pttl(k.journal)).toBe(-1);

    worker = await h.startWorker();
    expect(await h.waitForStatus(stopped, ENDED)).toBe('completed');
    const after = await h.ctx.store.transcript(stopped);
    expect(after.slice(0, 4)).toEqual(reopened);
    expect(after.filter((e) => e.kind === 'decision').map((e) => e.step)).toEqual([1, 2, 3]);
    expect(after.find((e) => e.kind === 'decision' && e.final !== undefined)).toMatchObject({ final: answer });
    // Ended again: packed again, every entry kept.
    await new Compactor(h.ctx).drain();
    expect(await packed(stopped)).toBe(1);
    expect(await h.ctx.store.transcript(stopped)).toEqual(after);
    expect(encodeEntry(after[3]!)).toBe(encodeEntry(reopened[3]!));
  });
});
