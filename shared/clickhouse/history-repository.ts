import { setTimeout as sleep } from 'node:timers/promises'
import type { Erasures, Override } from '../db/repositories/override-repository.js'
import { batchInserterOf } from './batch-inserter.js'
import { TsvRows } from './tsv.js'
import type { ClickHouse } from './client.js'
import { EVENT_COLUMNS } from './event-repository.js'

/**
 * Writes merge overrides (and their ends) to ClickHouse, where queries apply them. Versions are
 * doubled so that an end outranks the override it ends and nothing newer (an override pointed
 * further gets a new version from Postgres); writing the same rows twice changes nothing.
 */
export async function writeOverrides(ch: ClickHouse, overrides: Override[]): Promise<void> {
  const rows = new TsvRows()
  for (const o of overrides) rows.add([o.workspaceId, o.oldProfileId, o.newProfileId, o.version * 2 + (o.deleted ? 1 : 0), o.deleted ? 1 : 0])
  await batchInserterOf(ch).insert({ table: `${ch.database}.profile_overrides`, columns: ['workspace_id', 'old_profile_id', 'new_profile_id', 'version', 'deleted'] }, rows)
}

/** A copy keeps every column, the original insertion time included. */
const COPIED_COLUMNS = [...EVENT_COLUMNS, 'inserted_at']

/**
 * Overrides one copy statement takes at most. An INSERT ... SELECT holds the embedded engine, which
 * runs one statement at a time, for as long as it runs: every track batch's delivery waits behind
 * it. 1,000 overrides copy in ~10 ms at rest over the 10M-event preload, 100-200 ms on a busy
 * machine (5,000 at once: up to 0.8 s, in the accepted -> done of the requests behind it).
 */
const COPY_CHUNK = 1_000

/**
 * The squash's copy: every row of the overridden profiles written again under the profile it now
 * belongs to, by INSERT ... SELECT (reading only their key ranges), COPY_CHUNK overrides a
 * statement. Safe to repeat: a copy made twice has the same key and collapses.
 */
export async function copyOverriddenEvents(ch: ClickHouse, overrides: Override[]): Promise<void> {
  for (let i = 0; i < overrides.length; i += COPY_CHUNK) {
    const chunk = overrides.slice(i, i + COPY_CHUNK)
    await ch.client.command({
      query: `INSERT INTO ${ch.database}.events (${COPIED_COLUMNS.join(', ')})
              SELECT workspace_id, transform(profile_id, {olds:Array(UInt64)}, {news:Array(UInt64)}, profile_id), ${COPIED_COLUMNS.slice(2).join(', ')}
                FROM ${ch.database}.events
               WHERE workspace_id IN {workspaces:Array(String)} AND profile_id IN {olds:Array(UInt64)}`,
      query_params: {
        olds: chunk.map((o) => o.oldProfileId),
        news: chunk.map((o) => o.newProfileId),
        workspaces: [...new Set(chunk.map((o) => o.workspaceId))],
      },
    })
  }
}

/** The tables the sweep removes a profile's rows from: its history, its records and the overrides leading from it. */
export type HistoryTable = 'events' | 'profile_snapshots' | 'profile_overrides'
const PROFILE_COLUMN: Record<HistoryTable, string> = { events: 'profile_id', profile_snapshots: 'profile_id', profile_overrides: 'old_profile_id' }

/**
 * Removes every row of the given profiles from a table with one mutation (ALTER TABLE ... DELETE
 * rewrites the parts that hold them, so the rows leave the disk, unlike a lightweight DELETE that
 * only masks them), and waits until it is done. The statement only registers the mutation
 * (`mutations_sync = 0`, a server's default but not the embedded engine's, which otherwise ran the
 * whole rewrite inside the statement while every insert waited: 5.5 s for 20,000 profiles over
 * the 10M-event preload, up to ~90 s for a sweep after the identity bench); the engine's background
 * threads rewrite the parts and the wait polls. Safe to repeat.
 */
export async function eraseRowsOf(ch: ClickHouse, table: HistoryTable, profiles: Erasures[]): Promise<void> {
  const ids = profiles.flatMap((p) => p.profileIds)
  if (ids.length === 0) return
  await ch.client.command({
    query: `ALTER TABLE ${ch.database}.${table} DELETE WHERE workspace_id IN {workspaces:Array(String)} AND ${PROFILE_COLUMN[table]} IN {ids:Array(UInt64)}`,
    query_params: { workspaces: [...new Set(profiles.map((p) => p.workspaceId))], ids },
    clickhouse_settings: { mutations_sync: '0' },
  })
  await waitForMutations(ch, table)
}

const MUTATION_POLL_MS = 250

/** Waits until a table has no unfinished mutation; a mutation that keeps failing is an error. */
async function waitForMutations(ch: ClickHouse, table: HistoryTable): Promise<void> {
  for (;;) {
    const rs = await ch.client.query({
      query: `SELECT count() AS pending, anyIf(latest_fail_reason, latest_fail_reason != '') AS failure
                FROM system.mutations WHERE database = {db:String} AND table = {table:String} AND NOT is_done`,
      query_params: { db: ch.database, table },
      format: 'JSONEachRow',
    })
    const [row] = await rs.json<{ pending: string | number; failure: string }>()
    if (Number(row.pending) === 0) return
    if (row.failure) throw new Error(`mutation on ${table} failing: ${row.failure}`)
    await sleep(MUTATION_POLL_MS)
  }
}
