-- The listing of archived runs (GET /v1/runs without search terms, merged with Redis' listing: src/archive/db.ts
-- listArchivedRuns) walks runs newest end first, after a cursor (ended_at_ms, run_id); a tenant's walk reads this
-- index, an unscoped one the index on (ended_at_ms). Built inside the migration's transaction like every migration
-- here: on a large archive it holds writes (the archiver's copies wait) until it is built.
CREATE INDEX archived_runs_tenant_ended ON archived_runs (tenant, ended_at_ms DESC, run_id DESC);
