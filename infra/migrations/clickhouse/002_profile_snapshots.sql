-- The exported record of each profile, replaced by version; a deleted profile is a tombstone row.
CREATE TABLE IF NOT EXISTS {db}.profile_snapshots (
  workspace_id String,
  profile_id UInt64,
  version UInt64,
  deleted UInt8,
  random_bucket UInt16,
  record String,
  written_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = ReplacingMergeTree(version, deleted)
ORDER BY (workspace_id, profile_id)
