import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Erasures, Override } from '../db/repositories/override-repository.js'
import { batchInserterOf } from './batch-inserter.js'
import { TsvRows } from './tsv.js'
import type { ClickHouse } from './client.js'
import { clusterLiteral, localTable } from './cluster-layout.js'
import { EVENT_COLUMNS } from './event-repository.js'
import { inlineQueryParams } from './literals.js'
import { insertSettings, knownServer, serverFacts } from './server.js'

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
 * statement. Safe to repeat: a copy made twice has the same key and collapses. The chunk's ids are
 * written into the statement (a server reads it from the request body: at most ~100 KB of
 * literals, within its max_query_size), and the insert carries the settings every insert does.
 */
export async function copyOverriddenEvents(ch: ClickHouse, overrides: Override[]): Promise<void> {
  if (overrides.length === 0) return
  // The sweep's connection is a client of its own: on a cluster its insert settings need the cluster's shape.
  await serverFacts(ch)
  for (let i = 0; i < overrides.length; i += COPY_CHUNK) {
    const chunk = overrides.slice(i, i + COPY_CHUNK)
    await ch.client.command({
      query: inlineQueryParams(
        `INSERT INTO ${ch.database}.events (${COPIED_COLUMNS.join(', ')})
              SELECT workspace_id, transform(profile_id, {olds:Array(UInt64)}, {news:Array(UInt64)}, profile_id), ${COPIED_COLUMNS.slice(2).join(', ')}
                FROM ${ch.database}.events
               WHERE workspace_id IN {workspaces:Array(String)} AND profile_id IN {olds:Array(UInt64)}`,
        {
          olds: chunk.map((o) => o.oldProfileId),
          news: chunk.map((o) => o.newProfileId),
          workspaces: [...new Set(chunk.map((o) => o.workspaceId))],
        },
      ),
      clickhouse_settings: insertSettings(ch),
    })
  }
}

/** The tables the sweep removes a profile's rows from: its history, its records and the overrides leading from it. */
export type HistoryTable = 'events' | 'profile_snapshots' | 'profile_overrides'
const PROFILE_COLUMN: Record<HistoryTable, string> = { events: 'profile_id', profile_snapshots: 'profile_id', profile_overrides: 'old_profile_id' }

/** One mutation of an erasure: its statement and parameters, and the marker its text carries (`mutationOf`). */
export interface ErasureStatement {
  query: string
  params: Record<string, unknown>
  marker: string
}

/**
 * The ids one mutation takes at most on a cluster, by the length of their text: an ON CLUSTER
 * statement and a Replicated table's mutation are each kept in one Keeper node with their values
 * written out (ZooKeeper refuses nodes past 1 MB by default), and every host parses it again. On
 * one server a mutation takes every id of a pass: they travel as a parameter, never parsed as text.
 */
export const CLUSTER_MUTATION_IDS_TEXT = 200_000

/**
 * The statements erasing the given profiles' rows from a table: one ALTER TABLE ... DELETE (on a
 * cluster, of the local tables ON CLUSTER, in chunks of CLUSTER_MUTATION_IDS_TEXT). Each carries a
 * marker made of what it erases (an always-true `{erasure:String} != ''`), which its mutation's
 * text in system.mutations keeps: the sweep finds its own mutation by it, among any other
 * process's, and a pass repeated over the same profiles finds the one already registered.
 */
export function erasureStatements(ch: Pick<ClickHouse, 'database' | 'cluster'>, table: HistoryTable, profiles: Erasures[]): ErasureStatement[] {
  const ids = profiles.flatMap((p) => p.profileIds)
  if (ids.length === 0) return []
  const workspaces = [...new Set(profiles.map((p) => p.workspaceId))]
  const target = ch.cluster ? `${ch.database}.${localTable(table)} ON CLUSTER ${clusterLiteral(ch.cluster)}` : `${ch.database}.${table}`
  return (ch.cluster ? chunksByText(ids, CLUSTER_MUTATION_IDS_TEXT) : [ids]).map((chunk) => {
    const marker = `erasure:${createHash('sha1').update(JSON.stringify([table, workspaces, chunk])).digest('hex').slice(0, 24)}`
    return {
      query: `ALTER TABLE ${target} DELETE WHERE {erasure:String} != '' AND workspace_id IN {workspaces:Array(String)} AND ${PROFILE_COLUMN[table]} IN {ids:Array(UInt64)}`,
      params: { erasure: marker, workspaces, ids: chunk },
      marker,
    }
  })
}

function chunksByText(ids: number[], maxText: number): number[][] {
  const chunks: number[][] = [[]]
  let text = 0
  for (const id of ids) {
    const length = String(id).length + 2
    if (text + length > maxText && chunks[chunks.length - 1].length) {
      chunks.push([])
      text = 0
    }
    chunks[chunks.length - 1].push(id)
    text += length
  }
  return chunks
}

/** How long `eraseRowsOf` waits for its mutations by default; the sweep gives half its erasure bound. */
export const MUTATION_WAIT_MS = 30 * 60_000

/**
 * Removes every row of the given profiles from a table with one mutation (ALTER TABLE ... DELETE
 * rewrites the parts that hold them, so the rows leave the disk, unlike a lightweight DELETE that
 * only masks them), and waits until it is done. The statement only registers the mutation
 * (`mutations_sync = 0`, a server's default but not the embedded engine's, which otherwise ran the
 * whole rewrite inside the statement while every insert waited: 5.5 s for 20,000 profiles over
 * the 10M-event preload, up to ~90 s for a sweep after the identity bench); the engine's background
 * threads rewrite the parts and the wait polls, for this mutation alone and at most `waitMs`
 * (past it, an error: the mutation goes on, and the next pass waits for it rather than registering
 * another). Sent by `query`, whose parameters a server reads from the request body. Safe to repeat.
 */
export async function eraseRowsOf(ch: ClickHouse, table: HistoryTable, profiles: Erasures[], opts: { waitMs?: number } = {}): Promise<void> {
  const deadline = performance.now() + (opts.waitMs ?? MUTATION_WAIT_MS)
  const statements = erasureStatements(ch, table, profiles)
  if (statements.length === 0) return
  // On a cluster the wait counts the replicas, from the cluster's shape.
  await serverFacts(ch)
  for (const s of statements) {
    if ((await mutationOf(ch, table, s.marker)).hosts > 0) continue
    const rs = await ch.client.query({ query: s.query, query_params: s.params, format: 'TabSeparated', clickhouse_settings: { mutations_sync: '0' } })
    // ON CLUSTER answers a row per host once each has registered it (an error if one did not).
    await rs.text()
  }
  for (const s of statements) await waitForMutation(ch, table, s.marker, deadline)
}

const MUTATION_POLL_MS = 250

/**
 * The state of a marked mutation as system.mutations shows it (on a cluster, of every replica of
 * the local table): how many hosts list it, how many have it unfinished, and why one keeps failing.
 */
export function mutationStateSql(ch: Pick<ClickHouse, 'cluster'>): string {
  const source = ch.cluster ? `clusterAllReplicas(${clusterLiteral(ch.cluster)}, system.mutations)` : 'system.mutations'
  return `SELECT uniqExact(hostName()) AS hosts, countIf(NOT is_done) AS pending, anyIf(latest_fail_reason, NOT is_done AND latest_fail_reason != '') AS failure
              FROM ${source}
             WHERE database = {db:String} AND table = {table:String} AND NOT is_killed AND position(command, {marker:String}) > 0`
}

async function mutationOf(ch: ClickHouse, table: HistoryTable, marker: string): Promise<{ hosts: number; pending: number; failure: string }> {
  const rs = await ch.client.query({
    query: mutationStateSql(ch),
    query_params: { db: ch.database, table: ch.cluster ? localTable(table) : table, marker },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ hosts: string | number; pending: string | number; failure: string }>()
  return { hosts: Number(row.hosts), pending: Number(row.pending), failure: row.failure }
}

/** Waits until the marked mutation is done on every host; one that keeps failing, or outlasts the deadline, is an error. */
async function waitForMutation(ch: ClickHouse, table: HistoryTable, marker: string, deadline: number): Promise<void> {
  const hosts = knownServer(ch)?.cluster?.hosts ?? 1
  for (;;) {
    const m = await mutationOf(ch, table, marker)
    if (m.hosts >= hosts && m.pending === 0) return
    if (m.failure) throw new Error(`mutation on ${table} failing: ${m.failure}`)
    if (performance.now() > deadline) throw new Error(`mutation on ${table} not done in time; it goes on, and the next pass waits for it`)
    await sleep(MUTATION_POLL_MS)
  }
}
