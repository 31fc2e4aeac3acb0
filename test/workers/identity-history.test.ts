import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { countEvents } from '../../shared/clickhouse/event-repository.js'
import { countSegmentMembers } from '../../shared/clickhouse/segment-repository.js'
import type { Filter } from '../../shared/domain/segment-filter.js'
import { sweepHistory } from '../../workers/identity/sweep.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  // The sweep runs when a test calls it (the worker's own would wait for work an hour old).
  env = await startTestEnv({ workers: ['track', 'identity'], env: { IDENTITY_SWEEP_SECONDS: '3600', ERASURE_MAX_DELAY_SECONDS: '7200' } })
})
afterAll(async () => {
  await env.close()
})
beforeEach(async () => {
  ws = await env.workspace()
})

const ago = (hours: number) => new Date(Date.now() - hours * 3600_000).toISOString()
const sweep = (on = env) => sweepHistory({ pg: on.ctx.pg, clickhouse: on.clickhouse, config: on.config, logger: on.ctx.logger })

async function send(path: string, body: unknown, on = env, key = ws.key) {
  return (await on.writeAndWait(key, path, body)).progress
}
/** Users with `n` `played` events each (and a purchase for the first); answers their profile ids by external id. */
async function usersWithEvents(counts: Record<string, number>): Promise<Record<string, number>> {
  const events = Object.entries(counts).flatMap(([u, n]) => Array.from({ length: n }, (_, i) => ({ external_id: u, name: 'played', time: ago(i + 1) })))
  const [first] = Object.keys(counts)
  await send('/users/track', { events, purchases: [{ external_id: first, product_id: 'sku', currency: 'USD', price: 1, time: ago(1) }] })
  const r = await env.ctx.pg.query<{ external_id: string; id: number }>('SELECT external_id, id FROM profiles WHERE workspace_id = $1', [ws.id])
  return Object.fromEntries(r.rows.map((row) => [row.external_id, Number(row.id)]))
}

/**
 * Rows stored for the profiles, read from the table itself: no FINAL, and rows a lightweight
 * DELETE only masked are counted too (apply_deleted_mask = 0), so only rows gone from the parts
 * count as gone.
 */
async function rawRows(table: 'events' | 'profile_snapshots', ids: number[], on = env): Promise<number> {
  const rs = await on.clickhouse.client.query({
    query: `SELECT count() AS n FROM ${on.clickhouse.database}.${table} WHERE profile_id IN {ids:Array(UInt64)} SETTINGS apply_deleted_mask = 0`,
    query_params: { ids },
    format: 'JSONEachRow',
  })
  return Number((await rs.json<{ n: string }>())[0].n)
}
async function rawOwners(ids: number[]): Promise<Record<number, number>> {
  const rs = await env.clickhouse.client.query({
    query: `SELECT profile_id, count() AS n FROM ${env.clickhouse.database}.events WHERE profile_id IN {ids:Array(UInt64)}
             GROUP BY profile_id SETTINGS apply_deleted_mask = 0`,
    query_params: { ids },
    format: 'JSONEachRow',
  })
  return Object.fromEntries((await rs.json<{ profile_id: string; n: string }>()).map((r) => [Number(r.profile_id), Number(r.n)]))
}
/** Rows of the workspace in ClickHouse's override table, ended ones included. */
async function rawOverrides(): Promise<number> {
  const rs = await env.clickhouse.client.query({
    query: `SELECT count() AS n FROM ${env.clickhouse.database}.profile_overrides WHERE workspace_id = {ws:String} SETTINGS apply_deleted_mask = 0`,
    query_params: { ws: ws.id },
    format: 'JSONEachRow',
  })
  return Number((await rs.json<{ n: string }>())[0].n)
}
const members = (filter: Filter) => countSegmentMembers(env.clickhouse, ws.id, filter)
const pending = async () => {
  const r = await env.ctx.pg.query(
    `SELECT (SELECT count(*) FROM profile_overrides WHERE workspace_id = $1)::int AS overrides,
            (SELECT count(*) FROM pending_erasures WHERE workspace_id = $1)::int AS erasures`,
    [ws.id],
  )
  return r.rows[0] as { overrides: number; erasures: number }
}

describe('merges', () => {
  it('count in segments at once, and the sweep later moves the history under the kept user in bulk', async () => {
    const id = await usersWithEvents({ keep: 2, merged: 3, other: 1 })
    await send('/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'merged' }, identifier_to_keep: { external_id: 'keep' } }] })

    // At once: the merged user's history counts for the kept one, though its rows are not rewritten yet.
    expect(await countEvents(env.clickhouse, ws.id, [id.keep])).toEqual([{ kind: 'event', n: 5 }, { kind: 'purchase', n: 1 }])
    expect(await members({ custom_event: 'played', op: 'count_eq', value: 5 })).toBe(1)
    expect(await members({ custom_event: 'played', op: 'count_lt', value: 2 })).toBe(1)
    expect(await members({ purchase: '*', op: 'count_gte', value: 1 })).toBe(1)
    expect(await rawOwners([id.keep, id.merged])).toEqual({ [id.keep]: 3, [id.merged]: 3 })
    expect(await pending()).toEqual({ overrides: 1, erasures: 0 })

    expect(await sweep()).toMatchObject({ squashed: 1 })
    expect(await rawOwners([id.keep, id.merged])).toEqual({ [id.keep]: 6 })
    // The merged user's old records go too: it lives on as the kept user only; the override is gone.
    expect(await rawRows('profile_snapshots', [id.merged])).toBe(0)
    expect(await rawOverrides()).toBe(0)
    expect(await pending()).toEqual({ overrides: 0, erasures: 0 })
    expect(await countEvents(env.clickhouse, ws.id, [id.keep])).toEqual([{ kind: 'event', n: 5 }, { kind: 'purchase', n: 1 }])
    expect(await countEvents(env.clickhouse, ws.id)).toEqual([{ kind: 'event', n: 6 }, { kind: 'purchase', n: 1 }])
    expect(await members({ custom_event: 'played', op: 'count_eq', value: 5 })).toBe(1)
    expect(await members({ custom_event: 'played', op: 'count_gte', value: 1 })).toBe(2)
  })

  it('follow chains: A into B, then B into C reads as C; after a sweep, C into D still reads right', async () => {
    const id = await usersWithEvents({ a: 1, b: 2, c: 3, d: 1 })
    const merge = (from: string, to: string) =>
      send('/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: from }, identifier_to_keep: { external_id: to } }] })
    await merge('a', 'b')
    expect(await countEvents(env.clickhouse, ws.id, [id.b])).toEqual([{ kind: 'event', n: 3 }, { kind: 'purchase', n: 1 }])
    await merge('b', 'c')
    expect(await countEvents(env.clickhouse, ws.id, [id.c])).toEqual([{ kind: 'event', n: 6 }, { kind: 'purchase', n: 1 }])
    const overrides = await env.ctx.pg.query('SELECT old_profile_id, new_profile_id FROM profile_overrides WHERE workspace_id = $1 ORDER BY 1', [ws.id])
    expect(overrides.rows.map((r) => [Number(r.old_profile_id), Number(r.new_profile_id)])).toEqual([[id.a, id.c], [id.b, id.c]])
    expect(await members({ custom_event: 'played', op: 'count_eq', value: 6 })).toBe(1)

    await sweep()
    expect(await rawOwners([id.a, id.b, id.c])).toEqual({ [id.c]: 7 })
    await merge('c', 'd')
    expect(await countEvents(env.clickhouse, ws.id, [id.d])).toEqual([{ kind: 'event', n: 7 }, { kind: 'purchase', n: 1 }])
    expect(await members({ custom_event: 'played', op: 'count_eq', value: 7 })).toBe(1)
    expect(await members({ custom_event: 'played', op: 'count_gt', value: 0 })).toBe(1)
  })
})

describe('deletes', () => {
  it('hide the user at once and are erased physically by the sweep, with the histories merged into the user', async () => {
    const id = await usersWithEvents({ gone: 2, into: 1, bystander: 1 })
    await send('/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'into' }, identifier_to_keep: { external_id: 'gone' } }] })
    await send('/users/delete', { external_ids: ['gone'] })

    // At once: no export, count or segment shows the user or the history merged into it.
    expect((await env.readUsers(ws.key, { external_ids: ['gone', 'into'] })).users).toEqual([])
    expect(await countEvents(env.clickhouse, ws.id)).toEqual([{ kind: 'event', n: 1 }])
    expect(await members({ custom_event: 'played', op: 'count_gte', value: 1 })).toBe(1)
    expect(await members({ custom_event: 'played', op: 'count_lt', value: 1 })).toBe(0)
    expect(await members({ all: [] })).toBe(1)
    // Not yet erased: the rows are still stored, the erasure is pending (the merge's override ended with the delete).
    expect(await rawRows('events', [id.gone, id.into])).toBe(4)
    expect(await rawRows('profile_snapshots', [id.gone, id.into])).toBeGreaterThan(0)
    expect(await pending()).toEqual({ overrides: 0, erasures: 2 })

    expect(await sweep()).toMatchObject({ erased: 2 })
    expect(await rawRows('events', [id.gone, id.into])).toBe(0)
    expect(await rawRows('profile_snapshots', [id.gone, id.into])).toBe(0)
    expect(await pending()).toEqual({ overrides: 0, erasures: 0 })
    expect(await rawOverrides()).toBe(0)
    expect(await rawRows('events', [id.bystander])).toBe(1)
    expect((await env.readUsers(ws.key, { external_ids: ['bystander'] })).users).toHaveLength(1)
    expect(await sweep()).toEqual({ squashed: 0, erased: 0 })
  })

  it('wait for every batch that committed before them to reach ClickHouse before they are erased', async () => {
    const id = await usersWithEvents({ late: 1 })
    // A batch that committed but has not reached ClickHouse yet (a worker that died in between): it may still write rows of the user.
    await env.ctx.pg.query(`INSERT INTO applied_jobs (job_key, workspace_id) VALUES ($1, $2)`, [`track:owing-${ws.id}`, ws.id])
    await send('/users/delete', { external_ids: ['late'] })
    expect(await sweep()).toEqual({ squashed: 0, erased: 0 })
    expect(await rawRows('events', [id.late])).toBe(2)

    await env.ctx.pg.query('UPDATE applied_jobs SET completed = true WHERE job_key = $1', [`track:owing-${ws.id}`])
    expect(await sweep()).toEqual({ squashed: 0, erased: 1 })
    expect(await rawRows('events', [id.late])).toBe(0)
    expect(await rawRows('profile_snapshots', [id.late])).toBe(0)
  })

  it('are erased by the worker itself within ERASURE_MAX_DELAY_SECONDS', async () => {
    const local = await startTestEnv({ workers: ['track', 'identity'], env: { IDENTITY_SWEEP_SECONDS: '1', ERASURE_MAX_DELAY_SECONDS: '4' } })
    try {
      const w = await local.workspace()
      await local.writeAndWait(w.key, '/users/track', { events: [{ external_id: 'soon-gone', name: 'played', time: ago(1) }] })
      const profile = Number((await local.ctx.pg.query('SELECT id FROM profiles WHERE workspace_id = $1', [w.id])).rows[0].id)
      await local.writeAndWait(w.key, '/users/delete', { external_ids: ['soon-gone'] })
      const deletedAt = Date.now()
      await until('the erasure', async () => (await rawRows('events', [profile], local)) + (await rawRows('profile_snapshots', [profile], local)), (n) => n === 0, 10_000)
      expect(Date.now() - deletedAt).toBeLessThan(4_000)
    } finally {
      await local.close()
    }
  })
})
