import type { Filter } from '../domain/segment-filter.js'
import { compileSegmentFilter, type CompiledFilter } from '../domain/segment-sql.js'
import type { ClickHouse } from './client.js'
import { historyTablesOf } from './event-repository.js'
import { inlineQueryParams } from './literals.js'
import { tsvRows } from './tsv.js'

/** One segment member as stored: the profile id (a UInt64, kept as text) and its record JSON. */
export interface MemberRow {
  profile_id: string
  record: string
}

export function compileFor(ch: ClickHouse, filter: Filter): CompiledFilter {
  return compileSegmentFilter(filter, historyTablesOf(ch))
}

/**
 * Current member count of a segment: every input lives in ClickHouse. Its parameters go in as
 * literals, so on the embedded engine the count runs beside the track worker's queries, not
 * behind them (`inlineQueryParams`).
 */
export async function countSegmentMembers(ch: ClickHouse, workspaceId: string, filter: Filter): Promise<number> {
  const compiled = compileFor(ch, filter)
  const rs = await ch.client.query({
    query: inlineQueryParams(
      `SELECT count() AS n FROM ${ch.database}.profile_snapshots FINAL WHERE workspace_id = {ws:String} AND ${compiled.where}`,
      { ...compiled.params, ws: workspaceId, after: 0 },
    ),
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ n: string }>()
  return Number(rows[0]?.n ?? 0)
}

/**
 * One page of members in profile id order, after the keyset cursor `after`. Paged rather than
 * streamed because the embedded engine's client buffers a whole result; a page bounds memory.
 */
export async function readSegmentPage(
  ch: ClickHouse,
  workspaceId: string,
  compiled: CompiledFilter,
  page: { after: string; limit: number },
): Promise<MemberRow[]> {
  const rs = await ch.client.query({
    query: `SELECT profile_id, record FROM ${ch.database}.profile_snapshots FINAL
             WHERE workspace_id = {ws:String} AND profile_id > {after:UInt64} AND ${compiled.where}
             ORDER BY profile_id LIMIT {limit:UInt32}`,
    query_params: { ...compiled.params, ws: workspaceId, after: page.after, limit: page.limit },
    // Records are JSON text: as TabSeparated they arrive nearly as stored, where JSON rows would
    // escape every quote in them and be parsed twice.
    format: 'TabSeparated',
  })
  return tsvRows(await rs.text()).map(([profile_id, record]) => ({ profile_id, record }))
}
