-- One row per custom event or purchase occurrence. event_id is fixed at acceptance, so a
-- retried insert collapses under FINAL instead of counting twice (and in background merges).
CREATE TABLE IF NOT EXISTS {db}.events (
  workspace_id String,
  profile_id UInt64,
  event_id String,
  kind LowCardinality(String),
  name String,
  app_id String,
  time DateTime64(3, 'UTC'),
  properties String,
  currency String,
  price Float64,
  quantity UInt32,
  inserted_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = ReplacingMergeTree
ORDER BY (workspace_id, profile_id, kind, name, event_id)
