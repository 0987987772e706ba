/**
 * Following a ticket on a run's console page: the subject's chain of runs (its search, Redis' index and the archive's
 * runs of the subject), the tree of child runs under the run (and its parent), the time of each conversation entry
 * and a timeline of the run's steps, both from the run's event stream (each entry id is the ms Redis wrote it at). A
 * run Redis let go is read from the archive (its events, its status and child runs). Bounded: at most CHAIN_MAX runs
 * of a subject, TREE_MAX runs in a tree, EVENTS_READ events of a run.
 */
import type { JournalEntry } from '../../core/journal.js';
import type { RunStatus } from '../../core/status.js';
import type { EngineContext } from '../../runs/engineContext.js';
import type { RunRow } from '../../runs/list.js';
import { searchEverywhere } from '../../runs/search.js';
import { SEARCH_SUBJECT } from '../../store/keys.js';
import { eventOfId, readEventsAfter, STREAM_START, type RunEvent } from '../../store/runEvents.js';
import { readStatuses } from '../../store/runRecord.js';

const CHAIN_MAX = 100;
const TREE_MAX = 100;
const TREE_DEPTH = 4;
const EVENTS_READ = 2000;

/** The runs of a run's subject (same tenant and agent), oldest first: in Redis and, with an archive, past its retention. */
export async function subjectChain(
  ctx: EngineContext,
  run: { tenant: string; agent: string; key: string },
): Promise<RunRow[]> {
  const page = await searchEverywhere(ctx, {
    terms: [{ field: SEARCH_SUBJECT, value: run.key }],
    tenants: [run.tenant],
    agent: run.agent,
    limit: CHAIN_MAX,
  });
  return page.runs.reverse();
}

export interface TreeNode {
  runId: string;
  status: RunStatus | '';
  children: TreeNode[];
}

/**
 * Each run's status and child runs: from Redis, and from the archive for a run Redis no longer has ('' and none when
 * neither has it).
 */
async function linksOf(
  ctx: EngineContext,
  runIds: string[],
): Promise<{ status: RunStatus | ''; children: string[] }[]> {
  const [statuses, children] = await Promise.all([
    readStatuses(ctx.redis, ctx.keys, runIds),
    Promise.all(runIds.map((id) => ctx.redis.smembers(ctx.keys.run(id).children))),
  ]);
  const gone = runIds.filter((_, i) => statuses[i] === undefined);
  const archived = ctx.archive && gone.length > 0 ? await ctx.archive.treeNodes(gone) : undefined;
  return runIds.map((id, i) => {
    const a = statuses[i] === undefined ? archived?.get(id) : undefined;
    return a ? { status: a.status, children: a.childRunIds } : { status: statuses[i] ?? '', children: children[i]! };
  });
}

/** The run and its child runs, their children under them, TREE_DEPTH levels and TREE_MAX runs at most. */
export async function runTree(ctx: EngineContext, runId: string, status: RunStatus | ''): Promise<TreeNode> {
  const root: TreeNode = { runId, status, children: [] };
  let level = [root];
  let count = 1;
  for (let depth = 0; level.length > 0; depth++) {
    const links = await linksOf(
      ctx,
      level.map((n) => n.runId),
    );
    for (const [i, node] of level.entries()) if (node !== root) node.status = links[i]!.status;
    if (depth === TREE_DEPTH || count >= TREE_MAX) break;
    const next: TreeNode[] = [];
    for (const [i, node] of level.entries()) {
      const kids = [...links[i]!.children].sort().slice(0, Math.max(0, TREE_MAX - count));
      count += kids.length;
      node.children = kids.map((id) => ({ runId: id, status: '', children: [] }));
      next.push(...node.children);
    }
    level = next;
  }
  return root;
}

/**
 * A run's events, oldest first, each with the ms of its stream entry: from Redis, or as archived (`archived`: the
 * archive's copy, for a run Redis no longer has).
 */
export async function runEvents(
  ctx: EngineContext,
  runId: string,
  archived?: readonly { id: string; type: string; data: string }[],
): Promise<(RunEvent & { at: number })[]> {
  const events = archived
    ? archived.flatMap((e) => eventOfId(e) ?? [])
    : (await readEventsAfter(ctx.redis, ctx.keys.run(runId), STREAM_START, EVENTS_READ)).events;
  return events.map((e) => ({ ...e, at: Number(e.entry.split('-')[0]) }));
}

function payload(e: RunEvent): Record<string, unknown> {
  try {
    const v = JSON.parse(e.data) as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * When each conversation entry was written (ms), or undefined: an operator entry carries its own `at`; a decision
 * the time of its step's `decision` event (journalled before its effects) or else of the step's commit; an
 * observation its `observation` event (by call) or its step's commit; a status entry the `status_changed` event
 * that follows the previous entries.
 */
export function entryTimes(transcript: readonly JournalEntry[], events: readonly (RunEvent & { at: number })[]) {
  const decision = new Map<number, number>();
  const committed = new Map<number, number>();
  const observed = new Map<string, number>();
  const statusChanges: number[] = [];
  for (const e of events) {
    const p = payload(e);
    const step = typeof p.step === 'number' ? p.step : undefined;
    if (e.type === 'decision' && step !== undefined && !decision.has(step)) decision.set(step, e.at);
    else if (e.type === 'step_committed' && step !== undefined) committed.set(step, e.at);
    else if (e.type === 'observation' && typeof p.callId === 'string') observed.set(`${step}:${p.callId}`, e.at);
    else if (e.type === 'status_changed') statusChanges.push(e.at);
  }
  let last = 0;
  return transcript.map((m): number | undefined => {
    let at: number | undefined;
    if (m.kind === 'operator') at = m.at;
    else if (m.kind === 'decision') at = decision.get(m.step) ?? committed.get(m.step);
    else if (m.kind === 'observation') at = observed.get(`${m.step}:${m.callId}`) ?? committed.get(m.step);
    else at = statusChanges.find((t) => t >= last);
    if (at !== undefined) last = at;
    return at;
  });
}

export interface Bar {
  step: number;
  kind: 'model' | 'tool' | 'wait' | 'commit';
  label: string;
  from: number;
  to: number;
}

/**
 * A run's steps as bars on one time axis, from its events: each step's model call (its start to its decision), its
 * write tools (an action from `planned` to its last ledger move; a call journalled alone, to its observation), its
 * commit (from the last of those to step_committed), and the waits between a commit and the next step's start (a
 * park, a sleep, the queue). A step that journals nothing before its commit (no write) writes its start in the
 * commit's own entry: its model call is drawn from the run's previous event of note (creation or the last commit),
 * queue time included, and says so.
 */
export function timelineBars(events: readonly (RunEvent & { at: number })[]): Bar[] {
  const bars: Bar[] = [];
  const actions = new Map<string, Bar>();
  let step = 0;
  let started: { at: number; entry: string } | undefined;
  let lastAt = 0;
  let modelOpen = false;
  let previous: number | undefined;
  const closeModel = (at: number) => {
    if (!modelOpen || !started) return;
    if (previous !== undefined && started.at > previous)
      bars.push({ step, kind: 'wait', label: `wait before step ${step}`, from: previous, to: started.at });
    bars.push({ step, kind: 'model', label: `step ${step} model call`, from: started.at, to: at });
    modelOpen = false;
  };
  for (const e of events) {
    const p = payload(e);
    const s = typeof p.step === 'number' ? p.step : step;
    if (e.type === 'run_created') previous ??= e.at;
    else if (e.type === 'step_started') {
      step = s;
      started = { at: e.at, entry: e.entry };
      lastAt = e.at;
      modelOpen = true;
    } else if (!started) continue;
    else if (e.type === 'decision') {
      if (e.entry !== started.entry) closeModel(e.at);
      lastAt = e.at;
    } else if (e.type === 'effect' && typeof p.actionId === 'string') {
      closeModel(e.at);
      const bar = actions.get(p.actionId);
      if (bar) bar.to = e.at;
      else {
        const tool = typeof p.tool === 'string' ? p.tool : 'tool';
        const b: Bar = { step, kind: 'tool', label: `step ${step} ${tool}`, from: e.at, to: e.at };
        actions.set(p.actionId, b);
        bars.push(b);
      }
      lastAt = e.at;
    } else if (e.type === 'observation' && e.entry !== started.entry) {
      closeModel(e.at);
      const tool = typeof p.tool === 'string' ? p.tool : 'tool';
      if (![...actions.values()].some((b) => b.step === step && b.label.endsWith(` ${tool}`)))
        bars.push({ step, kind: 'tool', label: `step ${step} ${tool}`, from: lastAt, to: e.at });
      lastAt = e.at;
    } else if (e.type === 'step_committed') {
      if (modelOpen && e.entry === started.entry && previous !== undefined) {
        // Started and committed in one entry: the model call began after the previous event of note.
        bars.push({ step, kind: 'model', label: `step ${step} model call (and queue)`, from: previous, to: e.at });
        modelOpen = false;
      } else closeModel(e.at);
      bars.push({ step, kind: 'commit', label: `step ${step} commit`, from: lastAt, to: e.at });
      previous = e.at;
      started = undefined;
    }
  }
  return bars;
}
