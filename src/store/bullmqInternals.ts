/**
 * The only module that touches BullMQ internals (outside its supported API).
 *
 * To make "commit step N" and "step N+1's job exists" one atomic change, our
 * commit scripts embed BullMQ's own addStandardJob Lua (and, for the step commit,
 * addPrioritizedJob: flow control's step order) as a local function and call it
 * after the fence checks pass. BullMQ itself computes the script's keys
 * and arguments: its backend's `addJobToTransaction` (what `Job#addJob` calls) runs
 * against a capturing client that records the call instead of sending it. test/integration/bullmqInternals.test.ts
 * fails loudly when a BullMQ upgrade changes any of this (script name, key count, argument layout).
 *
 * The step commit also embeds BullMQ's moveToFinished (completion of the step's
 * own job, and the fetch of the worker's next job), so a step is one request:
 * BullMQ computes its keys and arguments (`moveToCompletedArgs`), and the
 * worker's own completion call is answered with the script's result
 * (`completeFromCommit`) instead of being sent.
 * Decision record 0014: docs/decisions/0014-our-commits-append-nothing-to-bullmqs-event-stream.md.
 * Decision record 0016: docs/decisions/0016-the-commits-copies-of-bullmq-leave-out-what-a-step-job-never-has.md.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { raw2NextJobData, type Job, type JobsOptions, type Queue } from 'bullmq';
import type { addStandardJob as AddStandardJobScript } from 'bullmq/dist/esm/scripts/addStandardJob-9.js';
import type { addPrioritizedJob as AddPrioritizedJobScript } from 'bullmq/dist/esm/scripts/addPrioritizedJob-9.js';
import type { moveToFinished as MoveToFinishedScript } from 'bullmq/dist/esm/scripts/moveToFinished-14.js';
import { InvariantError } from '../core/errors.js';
import { storeFull } from './unavailable.js';

// BullMQ does not export its scripts. Its ESM build cannot be deep-imported under plain node
// (its files import directories such as '../utils': ERR_UNSUPPORTED_DIR_IMPORT; tsx hides it),
// and it has no `exports` map, so `import 'bullmq'` is its CommonJS build anyway: the scripts are
// read from that build, by explicit file path. Pinned version; test/deploy/image.test.ts boots the
// built entry points under plain node.
const requireBullmq = createRequire(import.meta.url);
const { addStandardJob } = requireBullmq('bullmq/dist/cjs/scripts/addStandardJob-9.js') as {
  addStandardJob: typeof AddStandardJobScript;
};
const { addPrioritizedJob } = requireBullmq('bullmq/dist/cjs/scripts/addPrioritizedJob-9.js') as {
  addPrioritizedJob: typeof AddPrioritizedJobScript;
};
const { moveToFinished } = requireBullmq('bullmq/dist/cjs/scripts/moveToFinished-14.js') as {
  moveToFinished: typeof MoveToFinishedScript;
};

export const BULLMQ_ADD_KEYS = 9;
export const BULLMQ_ADD_ARGS = 3;
export const BULLMQ_FINISH_KEYS = 14;
export const BULLMQ_FINISH_ARGS = 9;

export interface CapturedAdd {
  keys: string[];
  argv: (string | Buffer)[];
}

/** A captured add of a job: BullMQ's addStandardJob (the wait list) or addPrioritizedJob (the prioritized set). */
export interface CapturedJobAdd extends CapturedAdd {
  prioritized: boolean;
}

/**
 * BullMQ's largest job priority (its `Job` refuses more): the score of a prioritized job is priority * 2^32 plus the
 * queue's counter, so jobs of one priority are taken in the order they were added.
 */
export const BULLMQ_MAX_PRIORITY = 2_097_152;

/**
 * Lua source of one of BullMQ's scripts, wrapped as `local function bullmq<Name>(KEYS, ARGV)`, after checking it is
 * the script, with the key count, our commit scripts were written against, and without its event appends.
 */
function embedded(script: { name: string; keys: number; content: string }, name: string, keys: number): string {
  if (script.name !== name || script.keys !== keys) {
    throw new InvariantError('internals_changed', `BullMQ internals changed: ${name} has ${script.keys} keys`);
  }
  const body = withoutEventStream(script.content, name);
  return `local function bullmq${name[0]!.toUpperCase()}${name.slice(1)}(KEYS, ARGV)\n${body}\nend\n`;
}

/**
 * BullMQ's upkeep of a queue's event stream (the stream its QueueEvents reads) becomes calls of a function that does
 * nothing: its appends (`rcall("XADD", ...)`), its trims (`rcall("XTRIM", ...)`, moveToFinished's trimEvents) and its
 * read of the stream's cap (`getOrSetMaxEvents`, an HGET of the queue's meta hash whose value only those two use).
 * What the engine's commits do to a job (added, waiting, active, completed) is said by the run's own event stream, in
 * the same atomic change; nothing reads BullMQ's. A step's commit made four appends, one trim and two reads of the
 * cap: about a seventh of the step's Redis CPU, the resource that bounds the fleet's steps per second (a call from a
 * script costs the server far more than the small write or read it makes). BullMQ's own scripts (a producer's add, a
 * worker's fetch when the commit did not fetch, a stalled job, a retry) still append, and its add and its stalled
 * check still cap the stream, so it stays bounded; a queue's BullMQ stream is no record of its steps. No result of
 * these calls is used but the cap's, which only they take (checked here: a script that assigns or returns an append's
 * or a trim's result, or reads the cap some other way, stops the boot).
 */
function withoutEventStream(content: string, name: string): string {
  checkEventStream(content, name);
  return `local function noEventStream() end\n${silenceEventStream(content)}`;
}

/** The one read of a queue's event-stream cap BullMQ's scripts make (includes/getOrSetMaxEvents.lua). */
const CAP_READ = 'rcall("HGET", metaKey, "opts.maxLenEvents")';

/** Fails the boot when `content` uses an append's or a trim's result, reads the cap another way, or appends no event we know of. */
function checkEventStream(content: string, name: string): void {
  if (/(=|return)\s*rcall\("(XADD|XTRIM)"/.test(content)) {
    throw new InvariantError('internals_changed', `BullMQ internals changed: ${name} uses an event append's result`);
  }
  if (!/\brcall\("XADD",/.test(content)) {
    throw new InvariantError('internals_changed', `BullMQ internals changed: ${name} appends no event we know of`);
  }
  if (content.split('opts.maxLenEvents').length - 1 !== content.split(CAP_READ).length - 1 + countCapWrites(content)) {
    throw new InvariantError(
      'internals_changed',
      `BullMQ internals changed: ${name} reads the event stream's cap anew`,
    );
  }
}

/** getOrSetMaxEvents' write of the default cap, taken only when its read found none (never, once it is silenced). */
const countCapWrites = (content: string): number =>
  content.split('rcall("HSET", metaKey, "opts.maxLenEvents"').length - 1;

/**
 * The silenced cap read answers 0: getOrSetMaxEvents then returns it without writing a default (0 is true in Lua), and
 * the only calls that take it are silenced too.
 */
const silenceEventStream = (content: string): string =>
  content
    .replace(/\brcall\("(XADD|XTRIM)",/g, 'noEventStream("$1",')
    .split(CAP_READ)
    .join('(noEventStream("HGET", metaKey, "opts.maxLenEvents") or 0)');

/** Lua source of BullMQ's addStandardJob, wrapped as `local function bullmqAddStandardJob(KEYS, ARGV)`. */
export const bullmqAddStandardJobFunction = () => embedded(addStandardJob, 'addStandardJob', BULLMQ_ADD_KEYS);

/** Lua source of BullMQ's addPrioritizedJob, wrapped as `local function bullmqAddPrioritizedJob(KEYS, ARGV)`. */
export const bullmqAddPrioritizedJobFunction = () => embedded(addPrioritizedJob, 'addPrioritizedJob', BULLMQ_ADD_KEYS);

/** Lua source of BullMQ's moveToFinished, wrapped as `local function bullmqMoveToFinished(KEYS, ARGV)`. */
export const bullmqMoveToFinishedFunction = () => embedded(moveToFinished, 'moveToFinished', BULLMQ_FINISH_KEYS);

/** One of BullMQ's scripts taken apart: the helpers it includes (by file, each once) and the rest. */
export interface BullmqScriptParts {
  definitions: Map<string, string>;
  /** The script's own preamble and body. */
  body: string;
}

const commandsDir = dirname(requireBullmq.resolve('bullmq/dist/cjs/commands/moveToFinished-14.lua'));
const SCRIPTS = { moveToFinished, addStandardJob, addPrioritizedJob };

/**
 * BullMQ's script `name` taken apart for the commit's function library (luaLibrary.ts), which defines the helpers
 * once, when it loads, where a script defines them again on every call. Read from the Lua sources BullMQ ships
 * beside its build (`dist/cjs/commands`), its includes resolved as its build resolves them, and checked against the
 * script BullMQ sends: the two put together must be it, line for line. Its event stream upkeep is calls of
 * `noEventStream` (which the library defines), as in `embedded`.
 */
export function bullmqScriptParts(name: keyof typeof SCRIPTS): BullmqScriptParts {
  const script = SCRIPTS[name];
  // Each include once, its own includes first (as BullMQ's build inlines them): a helper is defined after those it calls.
  const definitions = new Map<string, string>();
  const includeLine = /^--- @include "([^"]+)"\s*$/gm;
  // A file with its includes inlined (what BullMQ's build makes of it) and without them (its own text).
  const resolve = (file: string): { inlined: string; own: string } => {
    const text = readFileSync(file, 'utf8');
    const inlined = text.replace(includeLine, (_line, path: string) => {
      const target = join(dirname(file), `${path}.lua`);
      if (definitions.has(target)) return '';
      definitions.set(target, '');
      const included = resolve(target);
      definitions.delete(target);
      definitions.set(target, included.own);
      return included.inlined;
    });
    return { inlined, own: text.replace(includeLine, '') };
  };
  const { inlined: whole, own: body } = resolve(join(commandsDir, `${name}-${script.keys}.lua`));
  const lines = (text: string) =>
    text
      .split('\n')
      .map((l) => l.trimEnd())
      .filter((l) => l.trim() !== '')
      .join('\n');
  if (lines(whole) !== lines(script.content)) {
    throw new InvariantError('internals_changed', `BullMQ internals changed: ${name}'s Lua sources are not its script`);
  }
  checkEventStream(whole, name);
  const made = new Set<StepJobEdit>();
  const edited = (file: string, text: string) => forStepJobs(file, silenceEventStream(text), made);
  const parts = {
    definitions: new Map([...definitions].map(([file, text]) => [file, edited(file, text)])),
    body: edited(`${name}-${script.keys}.lua`, body),
  };
  const missed = STEP_JOB_EDITS.find((e) => e.script === name && !made.has(e));
  if (missed) {
    throw new InvariantError('internals_changed', `BullMQ internals changed: ${missed.file} has no \`${missed.from}\``);
  }
  return parts;
}

/**
 * One change to the commit's copy of a BullMQ script: `from` becomes `to` in the file named `file` (the script's own,
 * or one it includes), where it must stand exactly once.
 */
export interface StepJobEdit {
  script: keyof typeof SCRIPTS;
  file: string;
  from: string;
  to: string;
}

/**
 * What the step commit's copies of BullMQ's scripts leave out: calls for what a step job never has, or that the
 * commit has already made. A call from a script costs the server far more than the read it makes, and Redis's CPU
 * per step is what bounds the fleet's steps per second. Step jobs are added by the engine only: the commit's add and
 * a run's first job by BullMQ's add captured (captureAddJob refuses a parent, a deduplication id, a repeat), a wake or
 * a retry by `Queue#add` with the step job options and a delay; none has a parent or children in BullMQ's flows, or a
 * deduplication id, and each has its own id. So:
 * - moveToFinished: no read of the job's `:dependencies` and `:unsuccessful` (a job with pending or failed children
 *   cannot complete: a step job has none), no read of its `parentKey`, `parent` and `deid` fields (none is set: what
 *   HMGET answers for a job without them stands in), and removeLock's read of the lock answered by what the commit's
 *   fence read of the same key (includes/commitMemo.lua);
 * - addStandardJob and addPrioritizedJob: the queue's id counter taken only for a job without an id of its own (it
 *   names such a job; a job with its own id never reads it);
 * - the queue's marker (a job is ready) set once per commit: the fetch of the worker's next job sets what the add set;
 *   and the queue's settings read once: the add reads two of the four the fetch reads (includes/commitMemo.lua).
 * An edit is made wherever its file is taken apart (a helper may be included by several scripts), and must find its
 * text exactly once there, and be made in its `script`; or the boot stops (`internals_changed`): a BullMQ upgrade
 * that moves any of it must be read again.
 */
const STEP_JOB_EDITS: readonly StepJobEdit[] = [
  {
    script: 'moveToFinished',
    file: 'moveToFinished-14.lua',
    from: 'rcall("SCARD", jobIdKey .. ":dependencies")',
    to: '0',
  },
  {
    script: 'moveToFinished',
    file: 'moveToFinished-14.lua',
    from: 'rcall("ZCARD", jobIdKey .. ":unsuccessful")',
    to: '0',
  },
  {
    script: 'moveToFinished',
    file: 'moveToFinished-14.lua',
    from: 'rcall("HMGET", jobIdKey, "parentKey", "parent", "deid")',
    to: '{ false, false, false }',
  },
  {
    script: 'moveToFinished',
    file: 'removeLock.lua',
    from: 'rcall("GET", lockKey)',
    to: 'lockTokenOf(lockKey)',
  },
  {
    script: 'addStandardJob',
    file: 'isQueuePausedOrMaxed.lua',
    from: 'rcall("HMGET", queueMetaKey, "paused", "concurrency")',
    to: 'queueMetaOf(queueMetaKey)',
  },
  {
    script: 'moveToFinished',
    file: 'getQueueMetadata.lua',
    from: 'rcall("HMGET", queueMetaKey, "paused", "concurrency", "max", "duration")',
    to: 'queueMetaOf(queueMetaKey)',
  },
  {
    script: 'addStandardJob',
    file: 'addBaseMarkerIfNeeded.lua',
    from: 'rcall("ZADD", markerKey, 0, "0")',
    to: 'markQueue(markerKey)',
  },
  {
    script: 'addStandardJob',
    file: 'addStandardJob-9.lua',
    from: 'local jobCounter = rcall("INCR", KEYS[4])',
    to: 'local jobCounter = args[2] == "" and rcall("INCR", KEYS[4]) or ""',
  },
  {
    script: 'addPrioritizedJob',
    file: 'addPrioritizedJob-9.lua',
    from: 'local jobCounter = rcall("INCR", idKey)',
    to: 'local jobCounter = args[2] == "" and rcall("INCR", idKey) or ""',
  },
];

/** `text` (BullMQ's Lua file `file`) with the step job edits that name that file made, each added to `made`. */
export function forStepJobs(file: string, text: string, made = new Set<StepJobEdit>()): string {
  let out = text;
  for (const edit of STEP_JOB_EDITS) {
    if (basename(file) !== edit.file) continue;
    const found = out.split(edit.from).length - 1;
    if (found !== 1) {
      throw new InvariantError(
        'internals_changed',
        `BullMQ internals changed: ${edit.file} has \`${edit.from}\` ${found} times, not once`,
      );
    }
    out = out.replace(edit.from, () => edit.to);
    made.add(edit);
  }
  return out;
}

/**
 * A completion keeping a window of the queue's latest completed jobs (`removeOnComplete: { count }`) trims the
 * completed set back to it: a read of the jobs past it and a trim, two calls from the script on every step, each
 * costing the server far more than the one job it usually removes. One completion in COMPLETED_TRIM_EVERY of a
 * process trims (all the jobs past the window), the others keep theirs: the window holds at most
 * COMPLETED_TRIM_EVERY - 1 more jobs per worker process completing jobs of the queue.
 */
export const COMPLETED_TRIM_EVERY = 8;
let completions = 0;

/** A count-only window kept whole (BullMQ's `false`: keep every job); any other setting as it is. */
function untrimmed(removeOnComplete: JobsOptions['removeOnComplete']): JobsOptions['removeOnComplete'] {
  const countOnly = typeof removeOnComplete === 'object' && !('age' in removeOnComplete);
  return countOnly && removeOnComplete.count > 0 ? false : removeOnComplete;
}

/**
 * The exact KEYS and ARGV BullMQ's worker would send to complete this active job
 * (moveToFinished, target completed, no return value), computed by BullMQ.
 * With fetchNext the script also moves the queue's next job to active, locked
 * with the same token, and returns it (as the worker's own completion does).
 */
export function captureMoveToCompleted(job: Job, token: string, fetchNext: boolean): CapturedAdd {
  completions = (completions + 1) % COMPLETED_TRIM_EVERY;
  const backend = (job as unknown as { backend?: { moveToCompletedArgs?: MoveToCompletedArgs } }).backend;
  if (typeof backend?.moveToCompletedArgs !== 'function') {
    throw new InvariantError(
      'internals_changed',
      'BullMQ internals changed: job.backend.moveToCompletedArgs is missing',
    );
  }
  const keep = completions === 0 ? job.opts.removeOnComplete : untrimmed(job.opts.removeOnComplete);
  const all = backend.moveToCompletedArgs(job, undefined, keep, token, fetchNext);
  if (all.length !== BULLMQ_FINISH_KEYS + BULLMQ_FINISH_ARGS) {
    throw new InvariantError(
      'internals_changed',
      `BullMQ internals changed: moveToFinished took ${all.length} arguments`,
    );
  }
  return {
    keys: all.slice(0, BULLMQ_FINISH_KEYS).map(String),
    // ARGV[9] (fields to update) is absent for a completion: sent as ''.
    argv: all.slice(BULLMQ_FINISH_KEYS).map((a) => (a === undefined ? '' : (a as string | Buffer))),
  };
}

/**
 * addStandardJob's keys (wait, paused, meta, id, completed, delayed, active,
 * events, marker) are all among moveToFinished's keys of the same queue (wait,
 * active, prioritized, events, stalled, limiter, delayed, paused, meta, pc,
 * completed, job, metrics, marker), except `id`. A commit that does both sends
 * moveToFinished's 14 keys plus `id`, and rebuilds add's keys in Lua from these
 * positions (1-based into that list of 15; 15 is `id`).
 */
export const ADD_KEYS_FROM_FINISH = [1, 8, 9, 15, 11, 7, 2, 4, 14] as const;

/**
 * The same for addPrioritizedJob's keys (marker, meta, id, prioritized, delayed, completed, active, events, pc): all
 * among moveToFinished's but `id`, so a commit adds either kind of job with the same 15 keys.
 */
export const ADD_PRIORITIZED_KEYS_FROM_FINISH = [14, 9, 15, 3, 7, 11, 2, 4, 10] as const;

/**
 * The 15 BullMQ keys of a commit (moveToFinished's, then add's `id`), checked against ADD_KEYS_FROM_FINISH (or
 * ADD_PRIORITIZED_KEYS_FROM_FINISH for a prioritized add).
 */
export function commitBullKeys(add: CapturedAdd & { prioritized?: boolean }, finish: CapturedAdd): string[] {
  const positions = add.prioritized ? ADD_PRIORITIZED_KEYS_FROM_FINISH : ADD_KEYS_FROM_FINISH;
  const keys = [...finish.keys, add.keys[positions.indexOf(15)]!];
  for (let i = 0; i < BULLMQ_ADD_KEYS; i++) {
    if (keys[positions[i]! - 1] !== add.keys[i]) {
      throw new InvariantError(
        'internals_changed',
        `BullMQ internals changed: ${add.prioritized ? 'addPrioritizedJob' : 'addStandardJob'} key ${i + 1} (${add.keys[i]}) is not moveToFinished's`,
      );
    }
  }
  return keys;
}

type AddJobToTransaction = (client: unknown, jobData: unknown, jobId: string) => Promise<unknown>;
type MoveToCompletedArgs = (
  job: Job,
  returnValue: unknown,
  removeOnComplete: unknown,
  token: string,
  fetchNext: boolean,
) => unknown[];

/**
 * The step's commit already completed `job` (and fetched the worker's next job):
 * the BullMQ worker's own `job.moveToCompleted` call, made when the processor
 * returns, is answered with that result instead of being sent.
 * `raw` is moveToFinished's reply (0, or the next job's data).
 */
export function completeFromCommit(job: Job, raw: unknown, finishedOn: number): void {
  const next: unknown[] = raw2NextJobData(Array.isArray(raw) ? raw : (undefined as unknown as unknown[]));
  job.moveToCompleted = async () => {
    job.finishedOn = finishedOn;
    job.attemptsMade += 1;
    return next;
  };
}

/**
 * The exact KEYS and ARGV BullMQ would send to add this job, computed by BullMQ.
 * Only standard jobs (no delay, no priority, no parent) are supported.
 * Synchronous: BullMQ computes the call before its first await (the capturing
 * client is called in that synchronous part), so a commit waits for no promise
 * of it; if a BullMQ upgrade awaits first, nothing is captured and this throws.
 */
export function captureAddStandardJob(
  queue: Queue,
  name: string,
  data: unknown,
  opts: JobsOptions & { jobId: string },
): CapturedAdd {
  if (opts.priority) throw new InvariantError('invariant', 'captureAddStandardJob supports standard jobs only');
  return captureAddJob(queue, name, data, opts);
}

/**
 * The same for a job added to the queue at once: standard (the wait list) without `opts.priority`, prioritized (the
 * prioritized set, taken after the wait list, lowest priority first) with one (1 to BULLMQ_MAX_PRIORITY).
 */
export function captureAddJob(
  queue: Queue,
  name: string,
  data: unknown,
  opts: JobsOptions & { jobId: string },
): CapturedJobAdd {
  if (
    opts.delay ||
    opts.parent ||
    opts.deduplication ||
    'repeatJobKey' in opts ||
    typeof opts.backoff === 'number' ||
    (opts.priority !== undefined &&
      !(Number.isInteger(opts.priority) && opts.priority >= 0 && opts.priority <= BULLMQ_MAX_PRIORITY))
  ) {
    throw new InvariantError('invariant', 'captureAddJob supports standard and prioritized jobs only');
  }
  let captured: { name: string; args: (string | Buffer)[] } | undefined;
  const capturingClient = {
    runCommand(commandName: string, args: (string | Buffer)[]) {
      captured = { name: commandName, args };
      return Promise.resolve(opts.jobId);
    },
  };
  // What `Job#addJob` hands to the backend (Job#asJSON of `new Job(queue, name, data, opts)`),
  // without constructing a Job on every commit: for a standard job that is its name, JSON
  // data, timestamp and options with BullMQ's defaults; the backend computes keys and argv.
  const backend = (queue as unknown as { backend?: { addJobToTransaction?: AddJobToTransaction } }).backend;
  if (typeof backend?.addJobToTransaction !== 'function') {
    throw new InvariantError(
      'internals_changed',
      'BullMQ internals changed: queue.backend.addJobToTransaction is missing',
    );
  }
  const jobData = {
    name,
    data: JSON.stringify(data ?? {}),
    opts: { attempts: 0, ...opts },
    timestamp: opts.timestamp ?? Date.now(),
  };
  // Its promise resolves with the job id the capturing client answers; nothing waits for it.
  void backend.addJobToTransaction(capturingClient, jobData, opts.jobId).catch(() => undefined);
  const prioritized = Boolean(opts.priority);
  const expected = prioritized ? 'addPrioritizedJob:' : 'addStandardJob:';
  if (!captured || !captured.name.startsWith(expected)) {
    throw new InvariantError(
      'internals_changed',
      `BullMQ internals changed: expected ${expected.slice(0, -1)}, got ${captured?.name ?? 'nothing'}`,
    );
  }
  const all = captured.args;
  if (all.length !== BULLMQ_ADD_KEYS + BULLMQ_ADD_ARGS) {
    throw new InvariantError(
      'internals_changed',
      `BullMQ internals changed: ${expected.slice(0, -1)} took ${all.length} arguments`,
    );
  }
  return {
    keys: all.slice(0, BULLMQ_ADD_KEYS).map(String),
    argv: all.slice(BULLMQ_ADD_KEYS),
    prioritized,
  };
}

/**
 * Adds one more wake-up marker to a queue. After moveToWait BullMQ adds one
 * marker, which may be taken by the handing-back worker's own blocking
 * connection and dropped as it closes; a spare marker wakes another worker at
 * once (an idle worker pays one empty fetch for it).
 */
export async function wakeAnotherWorker(
  redis: { zadd(key: string, score: number, member: string): Promise<unknown> },
  markerKey: string,
): Promise<void> {
  await redis.zadd(markerKey, 0, '0');
}

/**
 * Lock tokens that name their connection. BullMQ's worker locks each job it
 * fetches with `${worker.id}:${n}` (a fetch through a completion reuses the
 * finished job's token). Setting `worker.id` to `<base>@<owner>`, where owner
 * names the connection the worker fetches, renews and commits on (its CLIENT ID
 * and its server, src/store/owners.ts), makes every lock say which connection
 * holds it, so a watcher can ask Redis whether that connection still exists
 * (src/worker/ownerWatch.ts, requeueDeadOwner-7.lua). `id` is public but
 * declared readonly and set once by BullMQ's constructor;
 * test/integration/bullmqInternals.test.ts fails if a fetched job's token stops
 * starting with it.
 */
export function nameWorkerOwner(worker: { id: string }, base: string, owner: string): void {
  worker.id = ownerId(base, owner);
}

export const ownerId = (base: string, owner: string): string => `${base}@${owner}`;

/** The owner a lock token names (`<base>@<owner>:<n>`, owner `<clientId>[-<server>]`), or undefined for any other. */
export function ownerOfToken(token: string): string | undefined {
  return /@(\d+(?:-[0-9a-f]+)?):\d+$/.exec(token)?.[1];
}

/** The stable base of a lock token (`<base>@<owner>:<n>` -> base): the same across reconnections. */
export function ownerBaseOfToken(token: string): string | undefined {
  return /^(.+)@\d+(?:-[0-9a-f]+)?:\d+$/.exec(token)?.[1];
}

/**
 * When delayed jobs are due, by job id (undefined: not in the delayed set). BullMQ scores its delayed zset with the due
 * time shifted left by 12 bits plus a counter (`timestamp * 0x1000 + (counter & 0xfff)`, its addDelayedJob and
 * moveToDelayed); one round trip for all of them. test/integration/flowRepair.test.ts reads it back for a job
 * delayed by BullMQ's own API, so a change of the encoding fails there.
 */
export async function delayedUntil(
  redis: {
    pipeline(): { zscore(key: string, member: string): unknown; exec(): Promise<[Error | null, unknown][] | null> };
  },
  delayedKey: string,
  jobIds: readonly string[],
): Promise<(number | undefined)[]> {
  if (jobIds.length === 0) return [];
  const pipe = redis.pipeline();
  for (const id of jobIds) pipe.zscore(delayedKey, id);
  const res = (await pipe.exec()) ?? [];
  return jobIds.map((_, i) => {
    const [err, score] = res[i] ?? [null, null];
    if (err) throw err;
    return score === null || score === undefined ? undefined : Math.floor(Number(score) / 0x1000);
  });
}

/** Since when each worker has been in its wait on the marker, and in its fetch (`timeFetches`). */
const markerWaitSince = new WeakMap<object, number>();
const fetchSince = new WeakMap<object, number>();

/**
 * Stamps each of the worker's waits on its queue's marker (its private `waitForJob`) and each fetch (`moveToActive`)
 * with its start, for `fetchLoopState`. Nothing else changes; a BullMQ without those methods is left as it is.
 */
export function timeFetches(worker: object): void {
  stamp(worker, 'waitForJob', markerWaitSince);
  stamp(worker, 'moveToActive', fetchSince);
}

function stamp(worker: object, method: string, since: WeakMap<object, number>): void {
  const w = worker as Record<string, unknown>;
  const original = w[method];
  if (typeof original !== 'function') return;
  const call = original as (...args: unknown[]) => Promise<unknown>;
  w[method] = function (this: unknown, ...args: unknown[]) {
    since.set(worker, Date.now());
    return call.apply(this, args).finally(() => since.delete(worker));
  };
}

/**
 * Paces the worker's fetch (`moveToActive`) while Redis refuses it for memory (OOM at maxmemory under noeviction):
 * BullMQ's loop asks again at once after an error that is not a lost connection, so a full store spun it, thousands
 * of refused fetches (and `worker_error` lines) a second. A fetch refused so waits `pauseMs` before its error goes
 * on, on BullMQ's own abortable delay (as its rate limit's wait does), which the worker's close cuts short.
 */
export function paceFullFetches(worker: object, pauseMs: number): void {
  const w = worker as Record<string, unknown>;
  const original = w.moveToActive;
  const delay = w.delay;
  if (typeof original !== 'function' || typeof delay !== 'function') return;
  const call = original as (...args: unknown[]) => Promise<unknown>;
  const wait = delay as (ms: number, abort: AbortController) => Promise<void>;
  w.moveToActive = function (this: unknown, ...args: unknown[]) {
    return call.apply(this, args).catch(async (err: unknown) => {
      if (storeFull(err) && !w.closing) {
        (w.abortDelayController as AbortController | null | undefined)?.abort();
        const abort = new AbortController();
        w.abortDelayController = abort;
        await wait.call(worker, pauseMs, abort);
      }
      throw err;
    });
  };
}

/** Where a BullMQ worker's fetch loop stands (read from its private fields), for the log of a loop found stopped. */
export interface FetchLoopState {
  /**
   * How long its current wait on the queue's marker has lasted (the blocking BZPOPMIN, and the reset of the blocking
   * connection BullMQ's watchdog starts when the command outlives its timeout); undefined when not waiting. A live
   * loop's wait ends within the block timeout (at most 10 s) plus the watchdog's 1 s.
   */
  markerWaitMs: number | undefined;
  /** How long its current fetch (moveToActive, one script on the main connection) has lasted; undefined: none. */
  fetchMs: number | undefined;
  drained: boolean;
  blockUntil: number;
  running: boolean;
  closing: boolean;
  /** Fetches and jobs its loop holds (BullMQ's AsyncFifoQueue). */
  inLoop: number | undefined;
  /** The status of its blocking connection's client (ioredis: ready, connect, reconnecting, end...). */
  blockingStatus: string | undefined;
}

/**
 * A worker's fetch loop state. Best effort: fields a BullMQ upgrade renames read as undefined or false, and the log
 * that carries it says less, nothing breaks.
 */
export function fetchLoopState(worker: object, now = Date.now()): FetchLoopState {
  const w = worker as {
    drained?: boolean;
    blockUntil?: number;
    running?: boolean;
    closing?: unknown;
    mainLoopQueue?: { numTotal?: () => number } | null;
    backend?: { blockingConnection?: { _client?: { status?: string } } };
  };
  const age = (since: WeakMap<object, number>) => (since.has(worker) ? now - since.get(worker)! : undefined);
  return {
    markerWaitMs: age(markerWaitSince),
    fetchMs: age(fetchSince),
    drained: w.drained === true,
    blockUntil: w.blockUntil ?? 0,
    running: w.running === true,
    closing: Boolean(w.closing),
    inLoop: w.mainLoopQueue?.numTotal?.(),
    blockingStatus: w.backend?.blockingConnection?._client?.status,
  };
}
