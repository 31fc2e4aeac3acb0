-- The ledger prune (workers/ledger-prune.ts) takes the oldest completed rows a chunk at a time:
-- this index finds them without reading the table. A job's row enters it once, when the job
-- completes (that update already writes a new row version: `completed` is in an index predicate).
CREATE INDEX applied_jobs_completed ON applied_jobs (applied_at) WHERE completed;
