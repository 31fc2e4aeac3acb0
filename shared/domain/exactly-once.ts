import type pg from 'pg'
import type { ClickHouse } from '../clickhouse/client.js'
import { deleteEventsOf, insertEvents, reassignEvents, type EventRow } from '../clickhouse/event-repository.js'
import { writeSnapshots, writeTombstones } from '../clickhouse/snapshot-repository.js'
import { completeJob, pendingOutbox, recordAppliedJob, type Outbox } from '../db/repositories/job-ledger-repository.js'
import { loadUserRecords } from '../db/repositories/user-record-repository.js'
import { withTransaction, type Pool } from '../db/pool.js'

class AlreadyApplied extends Error {}

export interface SyncDeps {
  pg: Pool
  clickhouse: ClickHouse
}

/**
 * Applies a job exactly once, whatever instant a crash strikes:
 * 1. one Postgres transaction holds the job's effects, its ledger row and its outbox;
 * 2. the outbox then reaches ClickHouse (event rows with ids fixed at acceptance, which
 *    collapse under FINAL if written twice; history moves; profile snapshots by version), all
 *    of which are safe to repeat;
 * 3. the ledger row is marked completed.
 * A retry finds the ledger row and replays only step 2 if step 3 had not happened.
 */
export async function applyExactlyOnce(
  deps: SyncDeps,
  job: { key: string; workspaceId: string },
  apply: (db: pg.PoolClient) => Promise<Outbox>,
  eventRows: (outbox: Outbox) => EventRow[],
): Promise<{ firstAttempt: boolean }> {
  let fresh: Outbox | undefined
  try {
    fresh = await withTransaction(deps.pg, async (db) => {
      const outbox = await apply(db)
      // Checked last: the common first attempt pays no extra round trip, a replay rolls back.
      if (!(await recordAppliedJob(db, job.key, job.workspaceId, outbox))) throw new AlreadyApplied()
      return outbox
    })
  } catch (e) {
    if (!(e instanceof AlreadyApplied)) throw e
  }
  const outbox = fresh ?? (await pendingOutbox(deps.pg, job.key))
  if (outbox) {
    await syncClickHouse(deps, job.workspaceId, outbox, eventRows(outbox))
    await completeJob(deps.pg, job.key)
  }
  return { firstAttempt: fresh !== undefined }
}

/** Brings ClickHouse up to date with committed Postgres changes; every step is idempotent. */
export async function syncClickHouse(deps: SyncDeps, workspaceId: string, outbox: Outbox, events: EventRow[]): Promise<void> {
  for (const move of outbox.reassign ?? []) await reassignEvents(deps.clickhouse, workspaceId, move.from, move.to)
  // Independent, so the snapshot read from Postgres and both inserts overlap (a third faster per job).
  await Promise.all([insertEvents(deps.clickhouse, events), writeProfileSnapshots(deps, workspaceId, outbox.profileIds)])
  // After the insert, so that events of a profile deleted by this job are erased too.
  const deleted = outbox.deletedProfiles ?? []
  if (deleted.length) {
    await deleteEventsOf(deps.clickhouse, workspaceId, deleted.map((d) => d.id))
    await writeTombstones(deps.clickhouse, workspaceId, deleted)
  }
}

/** Snapshots of the profiles' current committed state (profiles deleted since are skipped). */
export async function writeProfileSnapshots(deps: SyncDeps, workspaceId: string, profileIds: number[]): Promise<void> {
  if (profileIds.length === 0) return
  const records = await loadUserRecords(deps.pg, [...new Set(profileIds)])
  await writeSnapshots(
    deps.clickhouse,
    [...records.values()].map(({ record, profile }) => ({
      workspace_id: workspaceId,
      profile_id: profile.id,
      version: profile.version,
      random_bucket: profile.random_bucket,
      record,
    })),
  )
}
