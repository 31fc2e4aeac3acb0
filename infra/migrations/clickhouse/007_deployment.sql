-- The deployment whose history this database holds (its id from Postgres' `deployment` row), written
-- by the first process to open it; a process of another deployment refuses to start here.
CREATE TABLE IF NOT EXISTS {db}.deployment (
  id String,
  written_at DateTime64(3) DEFAULT now64(3)
) ENGINE = MergeTree
ORDER BY tuple()
