-- The archive of ended runs (src/archive/archiver.ts): one row per run, written once per end of the run
-- (INSERT ... ON CONFLICT on run_id: a newer end or a later erasure replaces the row, nothing else does).
CREATE TABLE archived_runs (
  run_id text PRIMARY KEY,
  tenant text NOT NULL,
  agent text NOT NULL,
  subject_key text NOT NULL,
  status text NOT NULL,
  reason text NOT NULL,
  created_at_ms bigint NOT NULL,
  -- The run's finishedAt in Redis: the version of the row.
  ended_at_ms bigint NOT NULL,
  -- The run's erasedAt in Redis when it was copied (0: never erased).
  erased_at_ms bigint NOT NULL DEFAULT 0,
  archived_at timestamptz NOT NULL DEFAULT now(),
  previous_run_id text,
  next_run_id text,
  parent_run_id text,
  child_run_ids jsonb NOT NULL DEFAULT '[]',
  -- GET /v1/runs/:id's body as Redis served it (transcript, effects with their history).
  view jsonb NOT NULL,
  -- The run spec (its input included), the run's event stream, its budget hash, its record (the run hash less spec).
  spec jsonb,
  events jsonb NOT NULL,
  budget jsonb NOT NULL,
  record jsonb NOT NULL,
  -- An agent's search fields as stored with the run (today: the input's top-level scalar fields).
  search_fields jsonb NOT NULL DEFAULT '{}',
  -- Times the row was written: 1 unless the run ended again after a retry, or was erased after it was archived.
  versions integer NOT NULL DEFAULT 1
);
CREATE INDEX archived_runs_subject ON archived_runs (tenant, subject_key);
CREATE INDEX archived_runs_ended ON archived_runs (ended_at_ms);

-- Every erasure (POST /v1/erasures): who asked, when, what it matched and which runs it rewrote. A field's value is
-- kept only as its sha256: the erasure's own record holds none of the customer's text.
CREATE TABLE erasures (
  id text PRIMARY KEY,
  tenant text NOT NULL,
  subject_key text,
  field_name text,
  field_value_sha256 text,
  requested_by text NOT NULL,
  requested_at timestamptz NOT NULL,
  run_ids jsonb NOT NULL
);
