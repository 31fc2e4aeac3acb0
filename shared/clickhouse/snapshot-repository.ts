import { batchInserterOf } from './batch-inserter.js'
import type { UserRecord } from '../domain/user-record.js'
import type { ClickHouse } from './client.js'

export interface Snapshot {
  workspace_id: string
  profile_id: number
  version: number
  random_bucket: number
  record: UserRecord
}

/** Writes profile snapshots; ClickHouse keeps the highest version of each profile. */
export async function writeSnapshots(ch: ClickHouse, snapshots: Snapshot[]): Promise<void> {
  await batchInserterOf(ch).insert(
    `${ch.database}.profile_snapshots`,
    snapshots.map((s) => ({
      workspace_id: s.workspace_id,
      profile_id: s.profile_id,
      version: s.version,
      deleted: 0,
      random_bucket: s.random_bucket,
      record: JSON.stringify(s.record),
    })),
  )
}

/** Marks deleted profiles; a tombstone outranks every earlier version. */
export async function writeTombstones(ch: ClickHouse, workspaceId: string, deleted: { id: number; version: number }[]): Promise<void> {
  await batchInserterOf(ch).insert(
    `${ch.database}.profile_snapshots`,
    deleted.map((d) => ({ workspace_id: workspaceId, profile_id: d.id, version: d.version, deleted: 1, random_bucket: 0, record: '' })),
  )
}

/** Current snapshots of the given profiles (deleted ones are gone). */
export async function readSnapshots(ch: ClickHouse, workspaceId: string, profileIds: number[]): Promise<Map<number, UserRecord>> {
  const rs = await ch.client.query({
    query: `SELECT profile_id, record FROM ${ch.database}.profile_snapshots FINAL
             WHERE workspace_id = {ws:String} AND profile_id IN {ids:Array(UInt64)}`,
    query_params: { ws: workspaceId, ids: profileIds },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ profile_id: string; record: string }>()
  return new Map(rows.map((r) => [Number(r.profile_id), JSON.parse(r.record) as UserRecord]))
}
