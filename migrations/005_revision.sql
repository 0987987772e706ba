-- A run changed after its end (an action that waited for a person, settled by their finding after the run was
-- cancelled) is copied again (src/store/lua/includes/expireRun.lua, reviseEndedRun): revision is the run hash's count
-- of such changes, the row's version after ended_at_ms and erased_at_ms, so a newer copy replaces the row and an older
-- one never does. Rows copied before it are revision 0, as their runs' hashes (no such change counted).
ALTER TABLE archived_runs ADD COLUMN revision integer NOT NULL DEFAULT 0;
