import type pg from 'pg'
import type { ClickHouse } from '../clickhouse/client.js'
import { insertEvents, type EventRow } from '../clickhouse/event-repository.js'
import { writeOverrides } from '../clickhouse/history-repository.js'
import { writeSnapshots, writeTombstones, type Snapshot } from '../clickhouse/snapshot-repository.js'
import { completeJobs, ledgerEntries, recordAppliedBatch, type BatchOutbox } from '../db/repositories/job-ledger-repository.js'
import { recordErasures, type Erasures } from '../db/repositories/override-repository.js'
import { loadUserRecords } from '../db/repositories/user-record-repository.js'
import { withTransaction, type Pool } from '../db/pool.js'
import { RetryableError } from '../errors.js'
import type { ObjectError } from './object-error.js'

class AlreadyApplied extends Error {}

/** Postgres unique_violation. */
const UNIQUE_VIOLATION = '23505'

export interface SyncDeps {
  pg: Pool
  clickhouse: ClickHouse
}

/** One job of a batch: its ledger key and workspace. */
export interface BatchMember {
  key: string
  workspaceId: string
}

/** What applying a batch's new jobs committed. */
export interface AppliedBatch {
  outbox: BatchOutbox
  errors: Map<string, ObjectError[]>
  /** Snapshots built from the batch's own state; the outbox's other profiles are read back. */
  snapshots: Snapshot[]
  /** Profiles the batch deleted whose ClickHouse rows are to be erased: queued in the same transaction. */
  erased: Erasures[]
}

/**
 * Applies a batch of jobs (a prefix of an ordered queue) exactly once, whatever instant a crash
 * strikes: the ledger tells which jobs an earlier attempt committed; the others are applied in one
 * transaction holding their effects, a ledger row per job and the batch's outbox; then every outbox
 * still owed (this batch's, and an earlier attempt's that crashed before ClickHouse) is written to
 * ClickHouse (idempotent: event ids fixed at acceptance, versioned snapshots and overrides), and
 * the jobs are marked completed. A unique violation while applying (two workers creating the same
 * profile) is retryable. Nothing here rewrites or deletes ClickHouse rows: a deleted
 * profile's tombstone hides it at once and the identity worker's sweep erases its rows later.
 * Returns each job's non-fatal errors, also for jobs an earlier attempt applied.
 */
export async function applyBatchExactlyOnce<M extends BatchMember>(
  deps: SyncDeps,
  members: M[],
  apply: (db: pg.PoolClient, fresh: M[]) => Promise<AppliedBatch>,
  eventRows: (member: M, owners: (number | null)[]) => EventRow[],
): Promise<Map<string, unknown[]>> {
  const ledger = await ledgerEntries(deps.pg, members.map((m) => m.key))
  const fresh = members.filter((m) => !ledger.has(m.key))
  let applied: AppliedBatch | undefined
  if (fresh.length) {
    try {
      applied = await withTransaction(deps.pg, async (db) => {
        const result = await apply(db, fresh).catch((e) => {
          // Another worker created the same profile (an external id, an alias) at once: the retry finds its row.
          throw (e as { code?: string }).code === UNIQUE_VIOLATION ? new RetryableError('concurrent profile creation', e) : e
        })
        await recordErasures(db, result.erased)
        const rows = fresh.map((m) => ({ key: m.key, workspaceId: m.workspaceId, errors: result.errors.get(m.key) ?? [] }))
        if (!(await recordAppliedBatch(db, rows, result.outbox))) throw new AlreadyApplied()
        return result
      })
    } catch (e) {
      if (!(e instanceof AlreadyApplied)) throw e
      return applyBatchExactlyOnce(deps, members, apply, eventRows)
    }
  }

  // Outboxes owed: this batch's, and those of earlier attempts that committed but did not complete.
  const owed = members.filter((m) => ledger.get(m.key)?.completed === false)
  const outboxes = new Map<string, BatchOutbox>()
  for (const m of owed) {
    const entry = ledger.get(m.key)!
    if (entry.outbox) outboxes.set(entry.batchKey, entry.outbox)
  }
  const events: EventRow[] = []
  for (const m of owed) {
    const entry = ledger.get(m.key)!
    events.push(...eventRows(m, entry.outbox?.owners[m.key] ?? []))
  }
  for (const m of fresh) events.push(...eventRows(m, applied!.outbox.owners[m.key] ?? []))
  const inMemory = new Set((applied?.snapshots ?? []).map((s) => `${s.workspace_id}\u0000${s.profile_id}`))
  const sent = [...outboxes.values(), ...(applied ? [applied.outbox] : [])]
  const readBack = sent.flatMap((o) =>
    o.profiles.map((p) => ({ workspaceId: p.workspaceId, profileIds: p.profileIds.filter((id) => !inMemory.has(`${p.workspaceId}\u0000${id}`)) })),
  )
  const snapshots = [...(applied?.snapshots ?? []), ...(await readSnapshotsOf(deps, readBack))]
  const tombstones = sent.flatMap((o) => o.deleted.map((d) => writeTombstones(deps.clickhouse, d.workspaceId, d.profiles)))
  await Promise.all([
    insertEvents(deps.clickhouse, events),
    writeSnapshots(deps.clickhouse, snapshots),
    ...tombstones,
    writeOverrides(deps.clickhouse, sent.flatMap((o) => o.overrides ?? [])),
  ])
  await completeJobs(deps.pg, [...owed, ...fresh].map((m) => m.key))

  const errors = new Map<string, unknown[]>()
  for (const m of members) errors.set(m.key, applied?.errors.get(m.key) ?? ledger.get(m.key)?.errors ?? [])
  return errors
}

/** Snapshots of profiles' current committed state, read back from Postgres (profiles deleted since are skipped). */
async function readSnapshotsOf(deps: SyncDeps, wanted: { workspaceId: string; profileIds: number[] }[]): Promise<Snapshot[]> {
  const ids = [...new Set(wanted.flatMap((w) => w.profileIds))]
  if (ids.length === 0) return []
  const records = await loadUserRecords(deps.pg, ids)
  return [...records.values()].map(({ record, profile }) => ({
    workspace_id: profile.workspace_id,
    profile_id: profile.id,
    version: profile.version,
    random_bucket: profile.random_bucket,
    record,
  }))
}
