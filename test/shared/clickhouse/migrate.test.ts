import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ClickHouse } from '../../../shared/clickhouse/client.js'
import { migrateClickHouse, MIGRATIONS_TABLE } from '../../../shared/clickhouse/migrate.js'
import { withClickHouseMigrationLock } from '../../../shared/db/repositories/clickhouse-migration-lock-repository.js'
import { FieldColumns } from '../../../shared/domain/segment-sql.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

async function settingsOf(table: string, ch: ClickHouse = env.clickhouse): Promise<string> {
  const rs = await env.clickhouse.client.query({
    query: 'SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {table:String}',
    query_params: { db: ch.database, table },
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

  it('plan for the release they are told: on 24.8 the merge_selector_base files are skipped and recorded, a later start on this engine applies them', async () => {
    const ch = { ...env.clickhouse, database: `${env.clickhouse.database}_stated` }
    try {
      const skipped = await migrateClickHouse(ch, { serverVersion: '24.8.14.39' })
      expect(skipped.filter((o) => o.skipped)).toEqual([
        { file: '005_event_merge_base.sql', outcome: 'skipped: needs ClickHouse 24.11, the server is 24.8.14.39', skipped: true },
        { file: '006_snapshot_merge_base.sql', outcome: 'skipped: needs ClickHouse 24.11, the server is 24.8.14.39', skipped: true },
      ])
      expect(await settingsOf('events', ch)).not.toContain('merge_selector_base')
      const applied = await migrateClickHouse(ch)
      expect(applied.map((o) => [o.file, o.outcome])).toEqual([
        ['005_event_merge_base.sql', 'applied'],
        ['006_snapshot_merge_base.sql', 'applied'],
      ])
      expect(await settingsOf('events', ch)).toContain('merge_selector_base = 20')
      const rs = await env.clickhouse.client.query({
        query: `SELECT file, outcome, server_version FROM ${ch.database}.${MIGRATIONS_TABLE} FINAL ORDER BY file`,
        format: 'JSONEachRow',
      })
      const recorded = await rs.json<{ file: string; outcome: string; server_version: string }>()
      expect(recorded.map((r) => r.file)).toEqual(['001_events.sql', '002_profile_snapshots.sql', '003_profile_overrides.sql', '004_steady_part_cleanup.sql', '005_event_merge_base.sql', '006_snapshot_merge_base.sql', '007_deployment.sql'])
      expect(recorded.every((r) => r.outcome === 'applied')).toBe(true)
      expect(recorded.find((r) => r.file === '001_events.sql')!.server_version).toBe('24.8.14.39')
    } finally {
      await env.clickhouse.client.command({ query: `DROP DATABASE IF EXISTS ${ch.database}` })
    }
  })

  it('run one process at a time when several start at once: every start succeeds, and the field columns are filled in once', async () => {
    const ch = { ...env.clickhouse, database: `${env.clickhouse.database}_concurrent` }
    try {
      const starts = Array.from({ length: 3 }, () => migrateClickHouse(ch, { serialize: (fn) => withClickHouseMigrationLock(env.ctx.pg, fn) }))
      const outcomes = await Promise.all(starts)
      // The first start applied every file; the others found them recorded.
      expect(outcomes.map((o) => o.length).sort()).toEqual([0, 0, 7])
      const rs = await env.clickhouse.client.query({
        query: `SELECT count() AS n FROM system.mutations WHERE database = {db:String} AND table = 'profile_snapshots' AND command LIKE '%MATERIALIZE COLUMN%'`,
        query_params: { db: ch.database },
        format: 'JSONEachRow',
      })
      // A command a column in system.mutations, and only one start's: three unserialized starts would each add theirs.
      expect(Number((await rs.json<{ n: string }>())[0].n)).toBe(FieldColumns.length)
    } finally {
      await env.clickhouse.client.command({ query: `DROP DATABASE IF EXISTS ${ch.database}` })
    }
  })
})
