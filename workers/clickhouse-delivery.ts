import type { ClickHouse } from '../shared/clickhouse/client.js'
import { insertEvents, type EventRow } from '../shared/clickhouse/event-repository.js'
import { writeOverrides } from '../shared/clickhouse/history-repository.js'
import { writeSnapshots, writeTombstones, type Snapshot } from '../shared/clickhouse/snapshot-repository.js'
import type { Pool } from '../shared/db/pool.js'
import type { BatchOutbox } from '../shared/db/repositories/job-ledger-repository.js'
import { loadStoredRecords } from '../shared/db/repositories/user-record-repository.js'

/**
 * Writes what committed batches owe ClickHouse: their event rows, the snapshots of the profiles
 * they changed (those a batch built in memory as given, the others read back from Postgres),
 * tombstones of the profiles they deleted and their merge overrides. Every write is idempotent
 * (event ids fixed at acceptance, versioned snapshots and overrides), so a batch delivered twice
 * changes nothing. Nothing here rewrites or deletes rows: a tombstone hides a deleted profile at
 * once and the identity worker's sweep erases its rows later.
 */
export async function deliverToClickHouse(
  deps: { pg: Pool; clickhouse: ClickHouse },
  outboxes: BatchOutbox[],
  events: Iterable<EventRow>,
  builtSnapshots: Snapshot[] = [],
): Promise<void> {
  const built = new Set(builtSnapshots.map((s) => `${s.workspace_id}\u0000${s.profile_id}`))
  const readBack = [...new Set(outboxes.flatMap((o) => o.profiles.flatMap((p) => p.profileIds.filter((id) => !built.has(`${p.workspaceId}\u0000${id}`)))))]
  const snapshots = [...builtSnapshots, ...(await readSnapshotsOf(deps.pg, readBack))]
  await Promise.all([
    insertEvents(deps.clickhouse, events),
    writeSnapshots(deps.clickhouse, snapshots),
    ...outboxes.flatMap((o) => o.deleted.map((d) => writeTombstones(deps.clickhouse, d.workspaceId, d.profiles))),
    writeOverrides(deps.clickhouse, outboxes.flatMap((o) => o.overrides ?? [])),
  ])
}

/** Snapshots of profiles' current committed state, read back from Postgres (profiles deleted since are skipped). */
async function readSnapshotsOf(pg: Pool, profileIds: number[]): Promise<Snapshot[]> {
  if (profileIds.length === 0) return []
  const records = await loadStoredRecords(pg, profileIds)
  return records.map(({ record, profile }) => ({
    workspace_id: profile.workspace_id,
    profile_id: profile.id,
    version: profile.version,
    random_bucket: profile.random_bucket,
    record,
  }))
}
