/** Typed call of src/store/lua/archiveCommitted-6.lua: a run's archive row is committed. */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ArchiveCommittedArgs {
  runId: string;
  /** The run's finishedAt, erasedAt and revision as the archived copy read them: the fence. */
  finishedAt: number;
  erasedAt: string | undefined;
  revision: number;
  retentionMs: number;
  now: number;
}

export type ArchiveCommitOutcome = 'marked' | 'changed' | 'at_work' | 'missing';

export async function archiveCommittedCall(
  redis: RedisClient,
  k: RunKeys,
  queue: string,
  a: ArchiveCommittedArgs,
): Promise<ArchiveCommitOutcome> {
  const res = await script(redis, 'archiveCommitted')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.actions,
    queue,
    a.runId,
    String(a.finishedAt),
    a.erasedAt ?? '',
    a.retentionMs,
    a.now,
    a.revision,
  );
  if (res === -3) return 'missing';
  const code = expectReply(res, { runId: a.runId }) as number;
  return code === 1 ? 'marked' : code === 2 ? 'at_work' : 'changed';
}
