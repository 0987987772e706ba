/**
 * The step commit (src/store/lua/commitStep-23.lua) with one of its writes taken out: what `redisCost --ablate`
 * replays to price each write. A read-only step's commit that stays `running` writes the journal entries, the budget
 * counters, the run hash's cursor, and one event stream entry (the run listing indexes change only when the status
 * does: a run's first and last step). The cursor has no ablation: it is the next commit's fence, and a replay
 * without it refuses every later commit. Each ablation names the exact text it removes and throws when the script
 * no longer holds it, so a changed commit cannot be priced by a removal that silently removes nothing.
 */
import { luaFiles } from '../../src/store/luaFiles.js';

export interface CommitAblation {
  /** The commit's text taken out ('' for none), and what stands in its place. */
  removes: string;
  keeps: string;
  /** Scripts (src/store/lua names) whose calls leave the replay with it: a write the step makes outside the commit. */
  drops?: readonly string[];
}

/** The commit's budget update, every counter: what `budget` and `cost` each replace (so the two do not join). */
const BUDGET_UPDATE =
  "addToBudget(KEYS[2], { 'stepsUsed', ARGV[5], 'tokensUsed', ARGV[6], 'costUsed', cost, 'contextBytes', ARGV[7] })";

export const COMMIT_ABLATIONS: Record<string, CommitAblation> = {
  journal: {
    removes:
      "if n > 0 then len = redis.call('RPUSH', KEYS[3], unpack(ARGV, 37, 36 + n)) else len = redis.call('LLEN', KEYS[3]) end",
    keeps: 'len = 0',
  },
  /** The whole budget update (every counter, money's too): removing some would price the include's loop, not the write. */
  budget: {
    removes: BUDGET_UPDATE,
    keeps: '',
  },
  /**
   * All of the money accounting: a step's cost charged beside its tokens (costUsed), and the tenant's, agent's and
   * fleet's spend leased and settled on their own slot (leaseSpend-1.lua, settleSpend-1.lua): the step as it was before money.
   */
  cost: {
    removes: BUDGET_UPDATE,
    // The other three counters the way the shipped include writes its usual four: straight to HMGET and HSET (the
    // include's loop, which a three-counter call would take, would price the loop, not money).
    keeps: `if ARGV[5] ~= '' and ARGV[6] ~= '' and ARGV[7] ~= '' then
  local b = redis.call('HMGET', KEYS[2], 'stepsUsed', 'tokensUsed', 'contextBytes')
  local s1, s2, s3 = budgetSum(b[1], ARGV[5]), budgetSum(b[2], ARGV[6]), budgetSum(b[3], ARGV[7])
  if s1 and s2 and s3 then
    redis.call('HSET', KEYS[2], 'stepsUsed', s1, 'tokensUsed', s2, 'contextBytes', s3)
  else
    addToBudget(KEYS[2], { 'stepsUsed', ARGV[5], 'tokensUsed', ARGV[6], 'contextBytes', ARGV[7] })
  end
else
  addToBudget(KEYS[2], { 'stepsUsed', ARGV[5], 'tokensUsed', ARGV[6], 'contextBytes', ARGV[7] })
end`,
    drops: ['leaseSpend', 'settleSpend'],
  },
  /** Every event the commit appends: a running step's one entry (emitStepEvents) and a stop's or park's (emitEvents). */
  events: {
    removes: `if status == 'running' and ARGV[29] ~= '' and ARGV[30] ~= '' and ARGV[12] ~= '' then
  emitStepEvents(KEYS[4], ARGV[9], step, ARGV[29], ARGV[30], ARGV[12])
else
  local events = { 'step_started', ARGV[29], 'decision', ARGV[30], 'step_committed', ARGV[12] }
  if status ~= 'running' then
    events[7] = 'status_changed'
    events[8] = cjson.encode({ status = status, reason = reason })
  end
  emitEvents(KEYS[4], ARGV[9], events)
end`,
    keeps: '',
  },
  index: { removes: 'indexRunStatus(KEYS[1], status, ARGV[8], ARGV[11], fromStatus, reason)', keeps: '' },
};

/** The shipped commit's source (its `-- @include` lines kept: redisCost builds a library of it). */
export function commitScript(): string {
  const file = luaFiles().find((f) => f.name === 'commitStep');
  if (!file) throw new Error('no commitStep script in src/store/lua');
  return file.source;
}

/** The scripts whose calls the named ablations (joined by `+`) take out of the replay. */
export function ablatedDrops(names: string): string[] {
  return names.split('+').flatMap((name) => COMMIT_ABLATIONS[name]?.drops ?? []);
}

/** The commit without the named writes (`events`, or several joined by `+`: `journal+budget`). */
export function ablatedCommit(names: string): string {
  let lua = commitScript();
  for (const name of names.split('+')) {
    const ablation = COMMIT_ABLATIONS[name];
    if (!ablation) throw new Error(`unknown ablation ${name}; one of ${Object.keys(COMMIT_ABLATIONS).join(', ')}`);
    if (ablation.removes === '') continue;
    const at = lua.indexOf(ablation.removes);
    if (at < 0 || lua.indexOf(ablation.removes, at + 1) >= 0)
      throw new Error(
        `ablation ${name}: commitStep no longer holds its text exactly once; update bench/lib/commitAblations.ts`,
      );
    lua = lua.slice(0, at) + ablation.keeps + lua.slice(at + ablation.removes.length);
  }
  return lua;
}
