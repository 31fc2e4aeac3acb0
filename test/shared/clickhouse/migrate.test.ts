import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrateClickHouse } from '../../../shared/clickhouse/migrate.js'
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

  it('can run again on a migrated database', async () => {
    await migrateClickHouse(env.clickhouse)
    expect(await settingsOf('events')).toContain('simultaneous_parts_removal_limit = 200')
  })
})
