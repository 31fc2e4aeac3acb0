-- Merges and deletes record overrides instead of rewriting the ClickHouse history one by one
-- (docs/identity.md).
-- A merge records an override: the events of `old_profile_id` (the merged profile, gone) read as
-- `new_profile_id`, always the end of the chain (when that profile is merged in turn, the row is
-- pointed further). Queries apply the overrides at once; the identity worker's sweep rewrites the
-- overridden rows in bulk and drops the overrides it applied (version-checked, so a row pointed
-- further meanwhile stays). `recorded_at` is the wall clock inside the writing transaction.
CREATE SEQUENCE profile_override_version;
CREATE TABLE profile_overrides (
  old_profile_id bigint PRIMARY KEY,
  workspace_id text NOT NULL,
  new_profile_id bigint NOT NULL,
  version bigint NOT NULL DEFAULT nextval('profile_override_version'),
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX profile_overrides_new ON profile_overrides (new_profile_id);

-- Deleted profiles whose ClickHouse rows (events and snapshots) the sweep has yet to erase physically.
CREATE TABLE pending_erasures (
  profile_id bigint PRIMARY KEY,
  workspace_id text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The sweep touches the history of a profile only once every batch committed before its merge or
-- delete has reached ClickHouse (nothing can write its rows afterwards): the oldest incomplete
-- ledger row tells, read through this small index.
CREATE INDEX applied_jobs_incomplete ON applied_jobs (applied_at) WHERE NOT completed;
