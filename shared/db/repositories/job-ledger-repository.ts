import { query, type Queryable } from '../pool.js'
import type { Override } from './override-repository.js'

/**
 * Deletes at most `limit` completed ledger rows applied more than `retentionSeconds` ago, oldest
 * first, found through the partial index `applied_jobs_completed` and deleted by row address (a
 * join on job_key made the planner scan the whole table); answers how many went. A row still
 * owing ClickHouse stays whatever its age: its outbox is yet to be written. SKIP LOCKED: two
 * pruning processes never wait on each other.
 */
export async function pruneLedger(db: Queryable, retentionSeconds: number, limit: number): Promise<number> {
  const r = await query(
    db,
    'pruneLedger',
    `DELETE FROM applied_jobs WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM applied_jobs
        WHERE completed AND applied_at < now() - make_interval(secs => $1)
        ORDER BY applied_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
    [retentionSeconds, limit],
  )
  return r.rowCount ?? 0
}

/** What a batch of jobs still owes ClickHouse after its Postgres commit; held by its first job's ledger row. */
export interface BatchOutbox {
  /** Owner profile of each event and purchase occurrence, per job key, in job order (null: not applied). */
  owners: Record<string, (number | null)[]>
  /** Profiles whose snapshot the batch changed. */
  profiles: { workspaceId: string; profileIds: number[] }[]
  /** Profiles the batch deleted, with the version their tombstone carries. */
  deleted: { workspaceId: string; profiles: { id: number; version: number }[] }[]
  /** Merge overrides the batch wrote or ended (identity batches). */
  overrides?: Override[]
}

/** A job's ledger row, with the outbox of the batch it was applied in. */
export interface LedgerEntry {
  completed: boolean
  errors: unknown[]
  batchKey: string
  outbox: BatchOutbox | null
}

/** Ledger rows of the given jobs (absent: never applied). */
export async function ledgerEntries(db: Queryable, jobKeys: string[]): Promise<Map<string, LedgerEntry>> {
  const r = await query<{ job_key: string; completed: boolean; errors: unknown[] | null; batch_key: string; outbox: BatchOutbox | null }>(
    db,
    'ledgerEntries',
    `SELECT a.job_key, a.completed, a.errors, COALESCE(a.batch_key, a.job_key) AS batch_key, l.outbox
       FROM applied_jobs a LEFT JOIN applied_jobs l ON l.job_key = COALESCE(a.batch_key, a.job_key)
      WHERE a.job_key = ANY($1::text[])`,
    [jobKeys],
  )
  return new Map(r.rows.map((row) => [row.job_key, { completed: row.completed, errors: row.errors ?? [], batchKey: row.batch_key, outbox: row.outbox }]))
}

/**
 * Records a batch's jobs as applied inside the transaction that applied them: one row per job,
 * the outbox on the first. False means another worker recorded one of them first (a worker whose
 * lock had expired): the caller rolls back.
 */
export async function recordAppliedBatch(db: Queryable, jobs: { key: string; workspaceId: string; errors: unknown[] }[], outbox: BatchOutbox): Promise<boolean> {
  const r = await query(
    db,
    'recordAppliedBatch',
    `INSERT INTO applied_jobs (job_key, workspace_id, batch_key, errors, outbox)
     SELECT r.job_key, r.workspace_id, $1, r.errors, CASE WHEN r.job_key = $1 THEN $2::jsonb END
       FROM json_to_recordset($3::json) AS r(job_key text, workspace_id text, errors jsonb)
     ON CONFLICT (job_key) DO NOTHING`,
    [jobs[0].key, JSON.stringify(outbox), JSON.stringify(jobs.map((j) => ({ job_key: j.key, workspace_id: j.workspaceId, errors: j.errors.length ? j.errors : null })))],
  )
  return r.rowCount === jobs.length
}

/** Marks jobs whose outbox reached ClickHouse. The outbox stays until the row is pruned: clearing it would cost a row write. */
export async function completeJobs(db: Queryable, jobKeys: string[]): Promise<void> {
  if (jobKeys.length === 0) return
  await query(db, 'completeJobs', 'UPDATE applied_jobs SET completed = true WHERE job_key = ANY($1::text[]) AND NOT completed', [jobKeys])
}

/**
 * When the oldest ledger row still owing ClickHouse was applied (null: none). A profile merged or
 * deleted before that instant can get no more rows in ClickHouse: every batch that could write
 * them committed before and has completed. Rows older than `ignoreBeforeSeconds` are left out, so
 * a batch that never completes cannot hold the sweep back forever.
 */
export async function oldestIncompleteJob(db: Queryable, ignoreBeforeSeconds: number): Promise<Date | null> {
  const r = await query<{ t: Date | null }>(
    db,
    'oldestIncompleteJob',
    `SELECT min(applied_at) AS t FROM applied_jobs WHERE NOT completed AND applied_at > now() - make_interval(secs => $1)`,
    [ignoreBeforeSeconds],
  )
  return r.rows[0].t
}
