/** The console's pages: the runs list, a run's page and its live fragment, the flow page, the spend page. */
import type { Router } from 'express';
import type { Ledger } from '../../ledger/ledger.js';
import type { EngineContext } from '../../runs/engineContext.js';
import { isVersionParked } from '../../runs/versionQueue.js';
import { versionLabel, type VersionRegistry } from '../../runs/versions.js';
import { isRunId } from '../../store/keys.js';
import { param } from '../../producer/fieldErrors.js';
import { actorSeesRun } from '../../operations/actor.js';
import type { Operator } from '../operatorIdentity.js';
import { pendingApprovals } from '../operators/approvals.js';
import { flowViewFor } from '../operators/flow.js';
import { humanQueue } from '../operators/reconciliations.js';
import { BadCursor, runListQueryInput, runListQuerySchema, runsPage as listPage } from '../operators/runsList.js';
import { entryTimes, runEvents, runTree, subjectChain, timelineBars } from './ticket.js';
import { archivedRunView, runView, type RunView } from '../runView.js';
import { html, refuse, whoOf, type Guard } from './access.js';
import { flowPage } from './flowPage.js';
import { spendPage } from './spendPage.js';
import { readSpendSeries } from '../operators/spend.js';
import { runJobs } from './jobs.js';
import { CONSOLE, errorPage, runLive, runPage, runsPage, type HumanItem, type RunPageData } from './pages.js';
import { readRun } from '../../store/runRecord.js';

/** A notice a form's redirect carries back (`?done=`): plain words only, never markup. */
const NOTICE = /^[\w :.-]{1,120}$/;

export interface PageDeps {
  ctx: EngineContext;
  ledger: Ledger;
  versions: VersionRegistry;
}

/** The served versions a run parked by a version change may continue under (those serving its shard). */
async function versionChange(d: PageDeps, runId: string, agent: string, pinned: string) {
  const shard = d.ctx.keys.shardOf(runId);
  const served = (await d.versions.served(agent)).filter((s) => s.shards.includes(shard));
  return {
    pinned,
    served: served.map((s) => ({
      agentVersion: s.version,
      toolsHash: s.toolsHash,
      label: versionLabel(s.version, s.toolsHash),
    })),
  };
}

/** Everything a run's page shows, or undefined when the operator may not see the run (404 like an unknown one). */
async function pageData(d: PageDeps, op: Operator, runId: string): Promise<RunPageData | undefined> {
  const { ctx, ledger } = d;
  if (!isRunId(runId) || !(await actorSeesRun(ctx, op, runId))) return undefined;
  const hot = await runView(ctx, runId, (id) => ledger.listForRun(id));
  // A run Redis let go is shown from the archive: its view, agent, input and events as archived.
  const [archivedView, archived] = hot
    ? [undefined, undefined]
    : await Promise.all([archivedRunView(ctx, runId), ctx.archive?.details(runId)]);
  const view = hot ?? (archivedView as RunView | undefined);
  if (!view) return undefined;
  const [spec, run] = hot
    ? await Promise.all([
        ctx.store.readSpec(runId).catch(() => undefined),
        readRun(ctx.redis, ctx.keys, runId, ['agent', 'jobId']),
      ])
    : [undefined, undefined];
  const agent = run?.agent ?? archived?.agent ?? null;
  const jobId = run?.jobId || null;
  const parked = isVersionParked(view.status, view.reason);
  const [chain, tree, events] = await Promise.all([
    subjectChain(ctx, { tenant: view.tenant, agent: agent ?? '', key: view.key }),
    runTree(ctx, runId, view.status),
    runEvents(ctx, runId, archived?.events),
  ]);
  const pinned = versionLabel(view.agent.agentVersion, view.agent.toolsHash);
  return {
    view,
    input: spec ? spec.input : archived ? archived.input : '(unreadable)',
    agent: agent ?? '',
    jobId: jobId ?? '',
    queueName: ctx.keys.queueName(ctx.keys.shardOf(runId)),
    approvals: await pendingApprovals(ctx, ledger, op.tenants, runId),
    humanItems: (await humanQueue(ctx, ledger, op.tenants, runId)) as unknown as HumanItem[],
    jobs: await runJobs(ctx, runId, jobId ?? ''),
    chain,
    tree,
    bars: timelineBars(events),
    times: entryTimes(view.transcript, events),
    ...(hot ? {} : { archived: true }),
    ...(parked ? { versionChange: await versionChange(d, runId, agent ?? '', pinned) } : {}),
  };
}

export function mountPages(r: Router, d: PageDeps, guard: Guard): void {
  r.get(CONSOLE, (_req, res) => res.redirect(303, `${CONSOLE}/runs`));

  r.get(`${CONSOLE}/runs`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    // Empty form fields mean "any".
    const query = Object.fromEntries(Object.entries(req.query).filter(([, v]) => v !== ''));
    // The search box's field input is `name=value`: the API's `field.<name>=value`.
    const { field, ...rest } = query;
    const pair = typeof field === 'string' ? /^([^=]+)=(.+)$/.exec(field) : null;
    if (field !== undefined && !pair) return void refuse(res, 400, 'invalid filter: field (name=value)');
    const parsed = runListQuerySchema.safeParse(
      runListQueryInput(pair ? { ...rest, [`field.${pair[1]!.trim()}`]: pair[2]!.trim() } : rest),
    );
    if (!parsed.success)
      return void refuse(res, 400, `invalid filter: ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`);
    try {
      const page = await listPage(d.ctx, { role: 'operator', operator: w.operator }, parsed.data);
      const filters = { ...parsed.data, ...(typeof field === 'string' ? { field } : {}) };
      html(res, 200, runsPage(w.operator, w.csrf ?? '', filters, page.runs, page.nextCursor));
    } catch (err) {
      if (err instanceof BadCursor) return void refuse(res, 400, err.message);
      throw err;
    }
  });

  r.get(`${CONSOLE}/flow`, guard('page'), async (_req, res) => {
    const w = whoOf(res);
    html(res, 200, flowPage(w.operator, await flowViewFor(d.ctx, w.operator)));
  });

  r.get(`${CONSOLE}/spend`, guard('page'), async (_req, res) => {
    const w = whoOf(res);
    html(res, 200, spendPage(w.operator, await readSpendSeries(d.ctx, w.operator.tenants)));
  });

  r.get(`${CONSOLE}/runs/:id`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    const data = await pageData(d, w.operator, param(req.params.id));
    if (!data) return void html(res, 404, errorPage(404, 'no such run', w.operator, w.csrf));
    const done = typeof req.query.done === 'string' && NOTICE.test(req.query.done) ? req.query.done : undefined;
    html(res, 200, runPage(w.operator, w.csrf ?? '', { ...data, ...(done ? { notice: done } : {}) }));
  });

  r.get(`${CONSOLE}/runs/:id/live`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    const data = await pageData(d, w.operator, param(req.params.id));
    if (!data) return void html(res, 404, 'no such run');
    html(res, 200, runLive(w.operator, w.csrf ?? '', data));
  });
}
