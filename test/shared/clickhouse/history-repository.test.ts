import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents, type EventRow } from '../../../shared/clickhouse/event-repository.js'
import { copyOverriddenEvents, eraseRowsOf, erasureStatements } from '../../../shared/clickhouse/history-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

/** Two events for each of `count` profiles from `first` on, in workspace `ws`. */
function eventsOf(ws: string, first: number, count: number): EventRow[] {
  return Array.from({ length: count }, (_, i) =>
    ['a', 'b'].map((k) => ({
      workspace_id: ws, profile_id: first + i, event_id: `${ws}-${first + i}-${k}`, kind: 'event' as const, name: `n${k}`, app_id: '',
      time: '2024-05-01T12:00:00.000Z', properties: '{}', currency: '', price: 0, quantity: 0,
    })),
  ).flat()
}

/** Rows per profile id of a workspace, deleted-but-masked rows included: only rows gone from the parts are gone. */
async function rowsByProfile(ws: string): Promise<Map<number, number>> {
  const rs = await env.clickhouse.client.query({
    query: `SELECT profile_id, count() AS n FROM ${env.clickhouse.database}.events WHERE workspace_id = {ws:String}
             GROUP BY profile_id SETTINGS apply_deleted_mask = 0`,
    query_params: { ws },
    format: 'JSONEachRow',
  })
  return new Map((await rs.json<{ profile_id: string; n: string }>()).map((r) => [Number(r.profile_id), Number(r.n)]))
}

describe('the history sweep in ClickHouse', () => {
  it('copies every overridden row, over as many statements as the overrides need', async () => {
    // 2,500 overrides: more than two statements' worth, the last one partial.
    const ws = 'ws-copy'
    await insertEvents(env.clickhouse, eventsOf(ws, 1, 2_500))
    const overrides = Array.from({ length: 2_500 }, (_, i) => ({ workspaceId: ws, oldProfileId: 1 + i, newProfileId: 10_001 + i, version: 1, deleted: false }))
    await copyOverriddenEvents(env.clickhouse, overrides)
    const rows = await rowsByProfile(ws)
    const copied = overrides.filter((o) => rows.get(o.newProfileId) === 2 && rows.get(o.oldProfileId) === 2)
    expect(copied.length).toBe(2_500)
    expect(rows.size).toBe(5_000)
  })

  it('erases the given profiles rows from the parts and leaves the others', async () => {
    const ws = 'ws-erase'
    await insertEvents(env.clickhouse, eventsOf(ws, 1, 100))
    await eraseRowsOf(env.clickhouse, 'events', [{ workspaceId: ws, profileIds: Array.from({ length: 50 }, (_, i) => 1 + 2 * i) }])
    const rows = await rowsByProfile(ws)
    expect([...rows.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => 2 + 2 * i))
    // Nothing of the erased profiles is left pending: the wait returned after the mutation was done.
    const rs = await env.clickhouse.client.query({
      query: `SELECT count() AS n FROM system.mutations WHERE database = {db:String} AND table = 'events' AND NOT is_done`,
      query_params: { db: env.clickhouse.database },
      format: 'JSONEachRow',
    })
    expect(Number((await rs.json<{ n: string }>())[0].n)).toBe(0)
  })

  /** The mutations of `events` whose text holds a marker, and how many are unfinished. */
  async function marked(marker: string): Promise<{ n: number; pending: number }> {
    const rs = await env.clickhouse.client.query({
      query: `SELECT count() AS n, countIf(NOT is_done) AS pending FROM system.mutations
               WHERE database = {db:String} AND table = 'events' AND position(command, {marker:String}) > 0`,
      query_params: { db: env.clickhouse.database, marker },
      format: 'JSONEachRow',
    })
    const [row] = await rs.json<{ n: string; pending: string }>()
    return { n: Number(row.n), pending: Number(row.pending) }
  }

  it('waits a bounded time for its own mutation, and a repeated erasure waits for that one instead of registering another', async () => {
    const ws = 'ws-bounded'
    await insertEvents(env.clickhouse, eventsOf(ws, 1, 10))
    const profiles = [{ workspaceId: ws, profileIds: [1, 2, 3] }]
    const [{ marker }] = erasureStatements(env.clickhouse, 'events', profiles)
    const table = `${env.clickhouse.database}.events`
    // Merges stopped: the mutation is registered but cannot run, as when a server is slow to get to it.
    await env.clickhouse.client.command({ query: `SYSTEM STOP MERGES ${table}` })
    try {
      const started = performance.now()
      await expect(eraseRowsOf(env.clickhouse, 'events', profiles, { waitMs: 800 })).rejects.toThrow('mutation on events not done in time')
      expect(performance.now() - started).toBeLessThan(5_000)
      expect(await marked(marker)).toEqual({ n: 1, pending: 1 })
    } finally {
      await env.clickhouse.client.command({ query: `SYSTEM START MERGES ${table}` })
    }
    await eraseRowsOf(env.clickhouse, 'events', profiles)
    expect(await marked(marker)).toEqual({ n: 1, pending: 0 })
    expect([...(await rowsByProfile(ws)).keys()].sort((a, b) => a - b)).toEqual([4, 5, 6, 7, 8, 9, 10])
  })
})
