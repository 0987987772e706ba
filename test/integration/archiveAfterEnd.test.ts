/**
 * A run's record changed after its end reaches the archive (ARCHIVE_URL, a real PostgreSQL from PATH). A run that an
 * operator cancels while an email of it waits for a person (its answer lost by a service with no lookup) ends held:
 * its archive row shows the action `needs_human`. The person's finding (POST /v1/reconciliations/:actionId) settles
 * the action after the run's end and its copy: the run goes back on the archive queue, keeps its keys until the new
 * row is committed, and once Redis let it go the archive serves the settled action, with the finding in the
 * transcript. A copy read before the finding is never marked as the run's last, and never overwrites the newer row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import type { Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { Archiver } from '../../src/archive/archiver.js';
import { upsertArchivedRun } from '../../src/archive/db.js';
import { snapshotRun } from '../../src/archive/snapshot.js';
import { runView } from '../../src/http/runView.js';
import { ledgerFor } from '../../src/ledger/ledger.js';
import { archiverFor } from '../../src/server/archiving.js';
import { call, email, final, operatorHarness, startScripted, turn } from './operators/support.js';

interface Effect {
  actionId: string;
  state: string;
  receipt?: string;
}
interface View {
  status: string;
  effects: Effect[];
  transcript: { kind: string; action?: string; detail?: string }[];
}

const RETENTION_MS = 1500;
let pg: EmbeddedPostgres;
let h: Harness & { url: string };
let archiver: Archiver;

beforeAll(async () => {
  pg = await startEmbeddedPostgres();
  h = await operatorHarness('archive-after-end', {
    ARCHIVE_URL: pg.url,
    RUN_RETENTION_MS: String(RETENTION_MS),
    RECONCILE_DEADLINE_MS: '200',
    RECONCILE_POLL_MS: '20',
  });
  archiver = archiverFor(h.ctx)!;
}, 60_000);
afterAll(async () => {
  await h?.close();
  await pg?.stop();
});

const viewOf = (runId: string) => runView(h.ctx, runId, (r) => ledgerFor(h.ctx).listForRun(r));
const queueOf = (runId: string) => h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(runId));
const runKeys = (runId: string) => {
  const k = h.ctx.keys.run(runId);
  return [k.run, k.budget, k.actions];
};

async function row(runId: string): Promise<{ view: View; versions: number; status: string }> {
  const res = await h.ctx.archive!.pool.query<{ view: View; versions: number; status: string }>(
    'SELECT view, versions, status FROM archived_runs WHERE run_id = $1',
    [runId],
  );
  expect(res.rows).toHaveLength(1);
  return res.rows[0]!;
}

/** A run parked needs_human on an email of unknown outcome, then cancelled by an operator: ended, held for a person. */
async function cancelledWithItem(prefix: string): Promise<{ runId: string; actionId: string }> {
  h.sandbox.reset();
  h.sandbox.setFaults([
    { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
    { kind: 'no_lookup', resource: 'emails' },
  ]);
  const runId = await startScripted(h, [turn([email]), final], prefix);
  expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
  h.sandbox.clearFaults();
  const cancel = await call<{ waitingForPerson: { actionId: string }[] }>(
    h.url,
    'POST',
    `/v1/runs/${runId}/cancel`,
    {},
  );
  expect(cancel.status).toBe(200);
  const actionId = cancel.body.waitingForPerson[0]!.actionId;
  await h.untilNoJob(runId);
  return { runId, actionId };
}

const confirm = (actionId: string) =>
  call(h.url, 'POST', `/v1/reconciliations/${actionId}`, {
    finding: 'confirmed',
    receipt: 'em_found_by_hand',
    evidence: { note: 'found in the provider console' },
  });

const effect = (view: View, actionId: string) => view.effects.find((e) => e.actionId === actionId);

describe("a run's record changed after its end", () => {
  it("a person's finding after the run was archived is archived too, and outlives Redis", async () => {
    const { runId, actionId } = await cancelledWithItem('AAE');
    await archiver.pass();
    const first = await row(runId);
    expect(first.status).toBe('cancelled');
    expect(effect(first.view, actionId)?.state).toBe('needs_human');
    // Archived and held for the person: no TTL, off the queue.
    expect(await h.ctx.redis.zscore(queueOf(runId), runId)).toBeNull();
    for (const key of runKeys(runId)) expect(await h.ctx.redis.pttl(key), key).toBe(-1);
    const stale = await snapshotRun(h.ctx, runId, viewOf);

    const found = await confirm(actionId);
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({ state: 'confirmed', resumed: false });
    // The row is out of date: the run is queued again, and keeps its keys until the new row is committed.
    expect(await h.ctx.redis.zscore(queueOf(runId), runId)).not.toBeNull();
    for (const key of runKeys(runId)) expect(await h.ctx.redis.pttl(key), key).toBe(-1);

    expect(await archiver.pass()).toMatchObject({ archived: 1, failed: 0 });
    const second = await row(runId);
    expect(second.versions).toBe(2);
    expect(effect(second.view, actionId)).toMatchObject({ state: 'confirmed', receipt: 'em_found_by_hand' });
    expect(second.view.transcript.some((e) => e.kind === 'operator' && e.action === 'resolve')).toBe(true);
    // The copy read before the finding does not overwrite it.
    expect(await upsertArchivedRun(h.ctx.archive!.pool, stale!.row)).toBe(false);
    expect(effect((await row(runId)).view, actionId)?.state).toBe('confirmed');
    for (const key of runKeys(runId)) {
      const ttl = await h.ctx.redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(RETENTION_MS);
    }

    // Redis lets it go; the API serves the archive's copy, the action settled.
    await until(
      'the run keys to expire',
      RETENTION_MS + 10_000,
      async () => (await h.ctx.redis.exists(...runKeys(runId))) === 0,
    );
    const served = await call<View>(h.url, 'GET', `/v1/runs/${runId}`);
    expect(served.status).toBe(200);
    expect(served.body.status).toBe('cancelled');
    expect(effect(served.body, actionId)).toMatchObject({ state: 'confirmed', receipt: 'em_found_by_hand' });
  });

  it("a copy read while the finding lands is not marked as the run's last: the next pass copies the settled run", async () => {
    const { runId, actionId } = await cancelledWithItem('AAR');
    // An archiver that reads the run's record, then the person's finding lands, then it reads the view as it was.
    let raced = false;
    const racing = new Archiver(h.ctx, h.ctx.archive!.pool, async (id) => {
      const view = await viewOf(id);
      if (id === runId && !raced) {
        raced = true;
        expect((await confirm(actionId)).status).toBe(200);
      }
      return view;
    });
    expect(await racing.pass()).toMatchObject({ archived: 0, deferred: 1 });
    expect(raced).toBe(true);
    // Left queued, its keys kept: the copy it wrote is not the run's last.
    expect(await h.ctx.redis.zscore(queueOf(runId), runId)).not.toBeNull();
    for (const key of runKeys(runId)) expect(await h.ctx.redis.pttl(key), key).toBe(-1);

    expect(await archiver.pass()).toMatchObject({ archived: 1, failed: 0 });
    const settled = (await row(runId)).view;
    expect(effect(settled, actionId)).toMatchObject({ state: 'confirmed', receipt: 'em_found_by_hand' });
    expect(settled.transcript.some((e) => e.kind === 'operator' && e.action === 'resolve')).toBe(true);
    for (const key of runKeys(runId)) expect(await h.ctx.redis.pttl(key), key).toBeGreaterThan(0);
  });
});
