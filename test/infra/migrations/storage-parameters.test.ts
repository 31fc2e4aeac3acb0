import { readFileSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { withDefaultUser } from '../../../shared/db/pool.js'
import { createTestDatabase, dbUrl, dropTestDatabase } from '../../helpers/harness.js'

const migration = path.resolve(import.meta.dirname, '../../../infra/migrations/postgres/012_dead_row_bounds.sql')

/** Storage parameters of a table as Postgres holds them (pg_class.reloptions). */
async function reloptions(db: pg.Client, table: string): Promise<Record<string, string>> {
  const { rows } = await db.query<{ reloptions: string[] | null }>('SELECT reloptions FROM pg_class WHERE oid = $1::regclass', [table])
  return Object.fromEntries((rows[0].reloptions ?? []).map((o) => o.split('=') as [string, string]))
}

const bounds = {
  autovacuum_vacuum_scale_factor: '0.02',
  autovacuum_vacuum_insert_scale_factor: '0.05',
  autovacuum_analyze_scale_factor: '0.02',
}
const expected: Record<string, Record<string, string>> = {
  profiles: { fillfactor: '70', ...bounds },
  profile_aliases: bounds,
  applied_jobs: {
    autovacuum_vacuum_scale_factor: '0.01',
    autovacuum_vacuum_threshold: '1000',
    autovacuum_vacuum_insert_scale_factor: '0.01',
    autovacuum_vacuum_insert_threshold: '10000',
    autovacuum_analyze_scale_factor: '0.02',
  },
}

describe('migration 012: storage parameters bounding dead rows on the hot tables', () => {
  let name: string
  let db: pg.Client
  beforeAll(async () => {
    name = await createTestDatabase()
    db = new pg.Client({ connectionString: withDefaultUser(dbUrl(name)) })
    await db.connect()
  })
  afterAll(async () => {
    await db?.end()
    if (name) await dropTestDatabase(name)
  })

  it.each(Object.keys(expected))('%s carries them once migrated', async (table) => {
    expect(await reloptions(db, table)).toEqual(expected[table])
  })

  it('runs again on a migrated database and leaves the same parameters', async () => {
    await db.query(readFileSync(migration, 'utf8'))
    for (const table of Object.keys(expected)) expect(await reloptions(db, table)).toEqual(expected[table])
  })
})
