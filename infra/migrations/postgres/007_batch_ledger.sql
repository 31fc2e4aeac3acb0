-- Track jobs are applied in batches: each job keeps its own ledger row (exactly once per job), the
-- batch's ClickHouse outbox is held by the row of its first job (`batch_key`), and a job's
-- non-fatal errors travel in their own column, so a replay can report them again.
ALTER TABLE applied_jobs ADD COLUMN batch_key text, ADD COLUMN errors jsonb;
