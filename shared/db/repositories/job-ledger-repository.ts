import { query, type Queryable } from '../pool.js'

/** What a job still owes ClickHouse after its Postgres commit. */
export interface Outbox {
  /** Owner profile of each event occurrence of the job, in job order (null: not applied). */
  eventOwners?: (number | null)[]
  profileIds: number[]
  /** Non-fatal errors found while applying, reported on the request. */
  errors?: unknown[]
  deletedProfiles?: { id: number; version: number }[]
  reassign?: { from: number; to: number }[]
}

/**
 * Records a job as applied, with its outbox, inside the transaction that applied it. False means
 * an earlier attempt already committed it: the caller rolls its own work back.
 */
export async function recordAppliedJob(db: Queryable, jobKey: string, workspaceId: string, outbox: Outbox): Promise<boolean> {
  const r = await query(
    db,
    'recordAppliedJob',
    'INSERT INTO applied_jobs (job_key, workspace_id, outbox) VALUES ($1, $2, $3) ON CONFLICT (job_key) DO NOTHING',
    [jobKey, workspaceId, JSON.stringify(outbox)],
  )
  return r.rowCount === 1
}

/** The outbox of a claimed job that has not completed yet; undefined once completed. */
export async function pendingOutbox(db: Queryable, jobKey: string): Promise<Outbox | undefined> {
  const r = await query<{ outbox: Outbox | null }>(
    db,
    'pendingOutbox',
    'SELECT outbox FROM applied_jobs WHERE job_key = $1 AND NOT completed',
    [jobKey],
  )
  return r.rows[0] ? (r.rows[0].outbox ?? { profileIds: [] }) : undefined
}

export async function completeJob(db: Queryable, jobKey: string): Promise<void> {
  await query(db, 'completeJob', 'UPDATE applied_jobs SET completed = true, outbox = NULL WHERE job_key = $1', [jobKey])
}

/** Ledger rows are kept a week: far longer than any job can wait to be retried. */
export async function pruneLedger(db: Queryable): Promise<number> {
  const r = await query(db, 'pruneLedger', `DELETE FROM applied_jobs WHERE completed AND applied_at < now() - interval '7 days'`)
  return r.rowCount ?? 0
}
