-- Merge overrides not yet squashed into the history: rows of `events` owned by old_profile_id read
-- as new_profile_id. Postgres holds the same rows (profile_overrides); the newest version wins,
-- and `deleted` ends an override (the sweep squashed it, or the profile it pointed to was deleted).
CREATE TABLE IF NOT EXISTS {db}.profile_overrides (
  workspace_id String,
  old_profile_id UInt64,
  new_profile_id UInt64,
  version UInt64,
  deleted UInt8
) ENGINE = ReplacingMergeTree(version, deleted)
ORDER BY (workspace_id, old_profile_id)
