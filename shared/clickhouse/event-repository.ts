import { batchInserterOf } from './batch-inserter.js'
import type { ClickHouse } from './client.js'

/** One custom event or purchase occurrence as stored in ClickHouse. */
export interface EventRow {
  workspace_id: string
  profile_id: number
  event_id: string
  kind: 'event' | 'purchase'
  name: string
  app_id: string
  time: string
  properties: string
  currency: string
  price: number
  quantity: number
}

const settings = { date_time_input_format: 'best_effort' } as const

/**
 * Inserts occurrences through the process's group commit. A retried job may write its rows a
 * second time; they carry the same event ids and collapse under FINAL (and in background merges).
 */
export async function insertEvents(ch: ClickHouse, rows: EventRow[]): Promise<void> {
  await batchInserterOf(ch).insert(`${ch.database}.events`, rows, settings)
}

/**
 * Moves a merged profile's history to the kept profile: copy, then delete. Safe to repeat: a
 * copy made twice collapses under FINAL (same event ids), and the delete is idempotent.
 */
export async function reassignEvents(ch: ClickHouse, workspaceId: string, fromProfile: number, toProfile: number): Promise<void> {
  const params = { ws: workspaceId, from: fromProfile, to: toProfile }
  await ch.client.command({
    query: `INSERT INTO ${ch.database}.events (workspace_id, profile_id, event_id, kind, name, app_id, time, properties, currency, price, quantity, inserted_at)
            SELECT workspace_id, {to:UInt64}, event_id, kind, name, app_id, time, properties, currency, price, quantity, inserted_at
              FROM ${ch.database}.events FINAL WHERE workspace_id = {ws:String} AND profile_id = {from:UInt64}`,
    query_params: params,
  })
  await deleteEventsOf(ch, workspaceId, [fromProfile])
}

export async function deleteEventsOf(ch: ClickHouse, workspaceId: string, profileIds: number[]): Promise<void> {
  if (profileIds.length === 0) return
  await ch.client.command({
    query: `DELETE FROM ${ch.database}.events WHERE workspace_id = {ws:String} AND profile_id IN {ids:Array(UInt64)}`,
    query_params: { ws: workspaceId, ids: profileIds },
  })
}

/** Occurrences stored for profiles, counted once per event id (what exports and segments see). */
export async function countEvents(ch: ClickHouse, workspaceId: string, profileIds?: number[]): Promise<{ kind: string; n: number }[]> {
  const rs = await ch.client.query({
    query: `SELECT kind, count() AS n FROM ${ch.database}.events FINAL
             WHERE workspace_id = {ws:String} ${profileIds ? 'AND profile_id IN {ids:Array(UInt64)}' : ''} GROUP BY kind ORDER BY kind`,
    query_params: { ws: workspaceId, ids: profileIds ?? [] },
    format: 'JSONEachRow',
  })
  return (await rs.json<{ kind: string; n: string }>()).map((r) => ({ kind: r.kind, n: Number(r.n) }))
}
