-- search_fields holds the agent's declared search fields (Agent.search: the run hash's `search`, the values the Redis
-- search indexes use), so the archive is searched by the same names as Redis (GET /v1/runs?customer=&field.<name>=).
-- Rows copied before held the input's top-level scalars: rewritten from the record's `search` (absent: none declared,
-- or erased).
UPDATE archived_runs
SET search_fields = CASE
  WHEN record ? 'search' AND jsonb_typeof(record -> 'search') = 'string' THEN (record ->> 'search')::jsonb
  ELSE '{}'::jsonb
END;
-- A search by field (containment, search_fields @> '{"customer": "..."}') and an erasure by field read this index.
CREATE INDEX archived_runs_search_fields ON archived_runs USING gin (search_fields jsonb_path_ops);
-- A search by subject across every tenant (a producer's token) reads this one; a tenant's, archived_runs_subject.
CREATE INDEX archived_runs_subject_any ON archived_runs (subject_key, created_at_ms DESC);
