// The whole service on the ClickHouse server path (CLICKHOUSE_URL), through the real
// @clickhouse/client HTTP transport, against test/helpers/clickhouse-http-shim.ts (a chDB engine
// behind the HTTP protocol subset the client uses; not a ClickHouse server).
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openClickHouse, type ClickHouse } from '../../shared/clickhouse/client.js'
import { sweepHistory } from '../../workers/identity/sweep.js'
import { startClickHouseShim, type ClickHouseShim } from '../helpers/clickhouse-shim.js'
import { dropTestDatabase, startTestEnv, type TestEnv } from '../helpers/harness.js'

const ROOT = path.resolve(import.meta.dirname, '../..')

let shim: ClickHouseShim
let server: ClickHouse
let env: TestEnv
beforeAll(async () => {
  shim = await startClickHouseShim('24.8.14.39')
  server = openClickHouse({ url: shim.url, dataDir: '/nonexistent', database: 'unused' })
  // The sweep runs when the test calls it.
  env = await startTestEnv({ workers: ['track', 'identity'], clickhouse: server, env: { CLICKHOUSE_URL: shim.url, IDENTITY_SWEEP_SECONDS: '3600', ERASURE_MAX_DELAY_SECONDS: '7200' } })
}, 60_000)
afterAll(async () => {
  await env?.close()
  await server?.close()
  await shim?.close()
})

const ago = (hours: number) => new Date(Date.now() - hours * 3600_000).toISOString()

/** Rows stored for a profile, masked ones included: only rows gone from the parts are gone. */
async function rawRows(table: 'events' | 'profile_snapshots', id: number): Promise<number> {
  const rs = await env.clickhouse.client.query({
    query: `SELECT count() AS n FROM ${env.clickhouse.database}.${table} WHERE profile_id = {id:UInt64} SETTINGS apply_deleted_mask = 0`,
    query_params: { id },
    format: 'JSONEachRow',
  })
  return Number((await rs.json<{ n: string }>())[0].n)
}

describe('the service on a ClickHouse server (the HTTP shim over chDB)', () => {
  it('applies a track request and reads it back, and a sweep binding 90,001 ids erases a deleted user', async () => {
    const ws = await env.workspace()
    const events = ['kept', 'gone'].flatMap((u) => [1, 2, 3].map((h) => ({ external_id: u, name: 'played', time: ago(h) })))
    await env.writeAndWait(ws.key, '/users/track', { events })
    const read = await env.readUsers(ws.key, { external_ids: ['kept'], fields_to_export: ['external_id', 'custom_events'] })
    expect(read.users).toEqual([{ external_id: 'kept', custom_events: [expect.objectContaining({ name: 'played', count: 3 })] }])
    const ids = await env.ctx.pg.query<{ external_id: string; id: number }>('SELECT external_id, id FROM profiles WHERE workspace_id = $1', [ws.id])
    const gone = ids.rows.find((r) => r.external_id === 'gone')!.id
    const kept = ids.rows.find((r) => r.external_id === 'kept')!.id
    expect(await rawRows('events', gone)).toBe(3)

    await env.writeAndWait(ws.key, '/users/delete', { external_ids: ['gone'] })
    // 90,000 more deleted profiles pending erasure (with no rows): one pass binds them all, past what a 1 MiB URL holds.
    await env.ctx.pg.query(
      `INSERT INTO pending_erasures (profile_id, workspace_id, recorded_at)
       SELECT 10000000000 + g, $1, now() - interval '1 hour' FROM generate_series(0, 89999) AS g`,
      [ws.id],
    )
    await shim.reset()
    const swept = await sweepHistory({ pg: env.ctx.pg, clickhouse: env.clickhouse, config: env.config, logger: env.ctx.logger })
    expect(swept).toEqual({ squashed: 0, erased: 90_001 })
    expect(await rawRows('events', gone)).toBe(0)
    expect(await rawRows('profile_snapshots', gone)).toBe(0)
    expect(await rawRows('events', kept)).toBe(3)

    const sent = await shim.statements()
    const erasures = sent.filter((s) => / DELETE WHERE /.test(s.sql))
    expect(erasures.map((s) => s.sql.split(' DELETE')[0])).toEqual(
      expect.arrayContaining([`ALTER TABLE ${env.clickhouse.database}.events`, `ALTER TABLE ${env.clickhouse.database}.profile_snapshots`, `ALTER TABLE ${env.clickhouse.database}.profile_overrides`]),
    )
    for (const s of erasures) {
      expect(s.multipart).toBe(true)
      expect(s.params.ids.split(',')).toHaveLength(90_001)
      expect(s.uriLength).toBeLessThan(300)
    }
    expect(sent.flatMap((s) => s.urlParams)).toEqual([])
    expect(sent.filter((s) => s.refused)).toEqual([])
  }, 120_000)
})

describe('the service entry point', () => {
  it('stops with code 2 and a message naming the version on a ClickHouse server older than 24.3', async () => {
    const old = await startClickHouseShim('23.8.16.16')
    const dbName = `uds_test_chold_${randomBytes(4).toString('hex')}`
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'bin/main.ts', 'api'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          CLICKHOUSE_URL: old.url,
          DATABASE_URL: `postgres://127.0.0.1:5432/${dbName}`,
          QUEUE_PREFIX: `udstest_${randomBytes(4).toString('hex')}`,
          PORT: '0',
          LOG_LEVEL: 'silent',
        },
      })
      let stderr = ''
      child.stderr.on('data', (d) => (stderr += d))
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
      expect(code).toBe(2)
      expect(stderr).toContain('the ClickHouse server at CLICKHOUSE_URL runs version 23.8.16.16; the service needs 24.3 or later')
    } finally {
      await old.close()
      await dropTestDatabase(dbName)
    }
  }, 60_000)
})
