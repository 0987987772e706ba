/**
 * A run whose entries are long enough to be stored compressed (src/core/journal.ts packEntry): every reader gets
 * them back as they were written (the run view over HTTP, the store's transcript, the replay harness), and once
 * the run has ended its keys hold no step-job data (includes/dropRunJobs.lua).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { Compactor } from '../../src/runs/compactor.js';
import { buildSpec } from '../../src/producer/intake.js';
import { replayRun } from '../../src/runs/replay.js';
import { DEFLATE_MARKER, decodeEntry, packEntry, unpackJournal, type JournalEntry } from '../../src/core/journal.js';
import { read, turn, usage } from '../../testkit/turns.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { LONG_FINAL_ANSWER, LONG_TICKET_BODY } from '../fixtures/longTranscript.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('cjournal');
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

const body = LONG_TICKET_BODY;
const answer = LONG_FINAL_ANSWER;

async function createLongRun(id: string): Promise<string> {
  const script: Script = [read, read, { ...turn([], { final: answer }), usage }];
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: { ...sampleTicket(id), body },
      budget: { maxSteps: 10 },
      agent: { model: 'scripted', script },
    },
    Date.now(),
  );
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  return spec.runId;
}

describe('compressed journal entries', () => {
  let runId: string;
  beforeAll(async () => {
    runId = await createLongRun('CJ-1');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    // Compacted after its end, as the reconciler's compactor does (src/runs/compactor.ts).
    await new Compactor(h.ctx).drain();
  });

  it('read back identically through the API, the store and the replay', async () => {
    const k = h.ctx.keys.run(runId);

    // Stored while the run worked: the long observations and the long final answer compressed, the short entries as
    // JSON. Ended, the journal is packed whole (src/runs/compact.ts): unpacked, each entry takes its list form again.
    expect(await h.ctx.redis.exists(k.journalPacked)).toBe(1);
    const raw = unpackJournal(await h.ctx.redis.getBuffer(k.journalPacked)).map(packEntry);
    const markers = raw.map((r) => (typeof r === 'string' ? r[0] : r[0] === DEFLATE_MARKER ? 'packed' : '?'));
    expect(markers).toEqual(['{', 'packed', '{', 'packed', 'packed', '{']);
    const written: JournalEntry[] = raw.map((r, i) => decodeEntry(r, i));
    const observations = written.filter((e) => e.kind === 'observation');
    expect(observations.map((o) => (o.output as { body: string }).body)).toEqual([body, body]);
    expect(written.find((e) => e.kind === 'decision' && e.final !== undefined)).toMatchObject({ final: answer });

    // The store's transcript and the API's run view.
    expect(await h.ctx.store.transcript(runId)).toEqual(written);
    expect(await h.ctx.store.journalEntry(runId, 1)).toEqual(written[1]);
    const { url } = await h.startApi();
    const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
    expect(res.status).toBe(200);
    const view = (await res.json()) as { transcript: JournalEntry[]; notes?: string[] };
    expect(view.notes).toBeUndefined();
    expect(view.transcript).toEqual(JSON.parse(JSON.stringify(written)));

    // The replay harness walks the same transcript to the same end.
    const spec = (await h.ctx.store.readSpec(runId))!;
    const agent = h.ctx.agents.get('support')!;
    const replayed = replayRun(spec, await h.ctx.store.transcript(runId), {
      completionCap: h.cfg.COMPLETION_TOKEN_CAP,
      inputTokens: agent.estimateInputTokens(spec.input),
      tools: agent.tools.specs,
    });
    expect(replayed).toMatchObject({ completed: true, stepsReplayed: 3 });
  });

  it("the ended run's keys hold no step-job data", async () => {
    const k = h.ctx.keys.run(runId);
    // Ended: none of its step jobs (data, return value) is left in the queue, nor the per-step bookkeeping.
    const queue = h.ctx.keys.queueKeyPrefix(h.ctx.keys.shardOf(runId));
    const completed = await h.ctx.redis.zrange(h.ctx.keys.finishedSet(h.ctx.keys.shardOf(runId), 'completed'), 0, -1);
    expect(completed.filter((id) => id.startsWith(`${runId}.`))).toEqual([]);
    for (const step of [1, 2, 3]) expect(await h.ctx.redis.exists(`${queue}${runId}.s${step}`)).toBe(0);
    expect(await h.ctx.redis.hmget(k.run, 'decidedStep', 'decisionIndex')).toEqual([null, null]);
    // What the API and console show stays: status, cursor, the current job's id, the events.
    expect(await h.ctx.redis.hmget(k.run, 'status', 'cursor', 'jobId')).toEqual(['completed', '4', `${runId}.s3`]);
    // The events: packed into one string by the run's compaction at its end, the stream kept (empty) for later ids.
    expect(await h.ctx.redis.strlen(k.eventsPacked)).toBeGreaterThan(0);
  });
});
