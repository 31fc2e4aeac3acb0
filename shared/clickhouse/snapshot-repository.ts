import { batchInserterOf, REPLACING_INSERT, type InsertTarget } from './batch-inserter.js'
import { TsvRows, tsvJson, tsvText } from './tsv.js'
import { FilterableFields } from '../domain/segment-filter.js'
import { FieldColumns, fieldColumnValue } from '../domain/segment-sql.js'
import type { StoredRecord } from '../domain/user-record.js'
import type { ClickHouse } from './client.js'

export interface Snapshot {
  workspace_id: string
  profile_id: number
  version: number
  random_bucket: number
  record: StoredRecord
}

const snapshotsOf = (ch: ClickHouse): InsertTarget => ({
  table: `${ch.database}.profile_snapshots`,
  columns: ['workspace_id', 'profile_id', 'version', 'deleted', 'random_bucket', 'record', ...FieldColumns],
  settings: REPLACING_INSERT,
})
const UNSET_FIELDS = FieldColumns.map(() => 'null')

/**
 * Writes profile snapshots; ClickHouse keeps the highest version of each profile. Each row is
 * written as one line (the record and the field columns are JSON text): a batch writes one for
 * every profile it changed.
 */
export async function writeSnapshots(ch: ClickHouse, snapshots: Snapshot[]): Promise<void> {
  const rows = new TsvRows()
  for (const s of snapshots) {
    const record = s.record as unknown as Record<string, unknown>
    let line = `${tsvText(s.workspace_id)}\t${s.profile_id}\t${s.version}\t0\t${s.random_bucket}\t${tsvJson(JSON.stringify(record))}`
    for (const f of FilterableFields) line += `\t${tsvJson(fieldColumnValue(record, f))}`
    rows.addLine(`${line}\n`)
  }
  await batchInserterOf(ch).insert(snapshotsOf(ch), rows)
}

/** Marks deleted profiles; a tombstone outranks every earlier version. */
export async function writeTombstones(ch: ClickHouse, workspaceId: string, deleted: { id: number; version: number }[]): Promise<void> {
  const rows = new TsvRows()
  for (const d of deleted) rows.add([workspaceId, d.id, d.version, 1, 0, '', ...UNSET_FIELDS])
  await batchInserterOf(ch).insert(snapshotsOf(ch), rows)
}

/** Current snapshots of the given profiles (deleted ones are gone). */
export async function readSnapshots(ch: ClickHouse, workspaceId: string, profileIds: number[]): Promise<Map<number, StoredRecord>> {
  const rs = await ch.client.query({
    query: `SELECT profile_id, record FROM ${ch.database}.profile_snapshots FINAL
             WHERE workspace_id = {ws:String} AND profile_id IN {ids:Array(UInt64)}`,
    query_params: { ws: workspaceId, ids: profileIds },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ profile_id: string; record: string }>()
  return new Map(rows.map((r) => [Number(r.profile_id), JSON.parse(r.record) as StoredRecord]))
}
