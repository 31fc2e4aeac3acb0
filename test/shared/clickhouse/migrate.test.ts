import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrateClickHouse } from '../../../shared/clickhouse/migrate.js'
import { FieldColumns } from '../../../shared/domain/segment-sql.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

async function settingsOf(table: string): Promise<string> {
  const rs = await env.clickhouse.client.query({
    query: 'SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {table:String}',
    query_params: { db: env.clickhouse.database, table },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ create_table_query: string }>()
  return row.create_table_query.slice(row.create_table_query.indexOf('SETTINGS'))
}

describe('ClickHouse migrations', () => {
  it('clean up merged-away parts every second, a bounded number at a time, on every history table', async () => {
    for (const table of ['events', 'profile_snapshots', 'profile_overrides']) {
      const settings = await settingsOf(table)
      expect(settings).toContain('cleanup_delay_period = 1')
      expect(settings).toContain('cleanup_delay_period_random_add = 0')
      expect(settings).toContain('simultaneous_parts_removal_limit = 200')
    }
  })

  it('merge event and snapshot parts twenty at a time, and overrides at the default', async () => {
    expect(await settingsOf('events')).toContain('merge_selector_base = 20')
    expect(await settingsOf('profile_snapshots')).toContain('merge_selector_base = 20')
    expect(await settingsOf('profile_overrides')).not.toContain('merge_selector_base')
  })

  it('can run again on a migrated database', async () => {
    await migrateClickHouse(env.clickhouse)
    expect(await settingsOf('events')).toContain('simultaneous_parts_removal_limit = 200')
  })

  it('gives a snapshots table of before the field columns every one of them, filled in from the stored records', async () => {
    const legacy = { ...env.clickhouse, database: `${env.clickhouse.database}_legacy` }
    const run = (query: string) => env.clickhouse.client.command({ query })
    await run(`CREATE DATABASE IF NOT EXISTS ${legacy.database}`)
    // profile_snapshots as infra/migrations/clickhouse/002 created it, with a row in it.
    await run(`CREATE TABLE ${legacy.database}.profile_snapshots (workspace_id String, profile_id UInt64, version UInt64, deleted UInt8,
      random_bucket UInt16, record String, written_at DateTime64(3, 'UTC') DEFAULT now64(3)) ENGINE = ReplacingMergeTree(version, deleted) ORDER BY (workspace_id, profile_id)`)
    await run(`INSERT INTO ${legacy.database}.profile_snapshots (workspace_id, profile_id, version, deleted, random_bucket, record)
      VALUES ('w', 1, 1, 0, 7, '{"created_at":"2024-01-01T00:00:00.000Z","email":"a\\/b@example.com","random_bucket":7}')`)
    await migrateClickHouse(legacy)
    const rs = await env.clickhouse.client.query({
      query: `SELECT name FROM system.columns WHERE database = {db:String} AND table = 'profile_snapshots' AND name LIKE 'field\\_%'`,
      query_params: { db: legacy.database },
      format: 'JSONEachRow',
    })
    expect((await rs.json<{ name: string }>()).map((r) => r.name).sort()).toEqual([...FieldColumns].sort())
    const row = await env.clickhouse.client.query({
      query: `SELECT field_email, field_random_bucket, field_country FROM ${legacy.database}.profile_snapshots FINAL`,
      format: 'JSONEachRow',
    })
    // Each column holds its field's value as JSON text.
    const values = (await row.json<Record<string, string>>()).map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, JSON.parse(v)])))
    expect(values).toEqual([{ field_email: 'a/b@example.com', field_random_bucket: 7, field_country: null }])
    await run(`DROP DATABASE ${legacy.database}`)
  })
})
