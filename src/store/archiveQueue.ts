/**
 * The archive's side of a run's end in Redis. Without an archive a terminal run's keys get RUN_RETENTION_MS when it
 * ends; with one (ARCHIVE_URL) the scripts that end a run are given the retention negated: they set no TTL and put
 * the run on its shard's archive queue (includes/runIndex.lua), and archiveCommitted-6.lua sets the TTL once the
 * archive row is committed. So a run never leaves Redis before its archive row exists.
 */
import type { Config } from '../config/config.js';

/** The retention the scripts that end a run are given (see above). */
export function retentionAtEnd(cfg: Pick<Config, 'RUN_RETENTION_MS' | 'ARCHIVE_URL'>): number {
  return cfg.ARCHIVE_URL === undefined ? cfg.RUN_RETENTION_MS : -cfg.RUN_RETENTION_MS;
}
