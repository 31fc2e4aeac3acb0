// The physical limits in this run: the fastest plain batched upsert of the benchmark's attribute rows
// into Postgres, and the fastest plain insert of its event rows into ClickHouse. Prints one JSON line.
import path from 'node:path'
import pg from 'pg'
import { openClickHouse } from '../shared/clickhouse/client.js'
import { freshDatabase, pool, tempDir } from './lib.js'
import { ensureDatabase } from '../shared/db/migrate.js'

const USERS = Number(process.argv[2] ?? 100_000)
const PER_REQUEST = 75
const ROWS = Math.ceil(USERS / PER_REQUEST) * PER_REQUEST

async function postgresUpsert(batch: number, concurrency: number): Promise<number> {
  const url = await freshDatabase('uds_bench_raw')
  await ensureDatabase(url)
  const db = new pg.Pool({ connectionString: url, max: concurrency })
  await db.query('CREATE TABLE raw_profiles (external_id text PRIMARY KEY, first_name text, custom_attributes jsonb NOT NULL)')
  const batches = Math.ceil(ROWS / batch)
  const started = performance.now()
  await pool(batches, concurrency, async (b) => {
    const ids: string[] = []
    const names: string[] = []
    const attrs: string[] = []
    for (let j = 0; j < batch; j++) {
      const n = (b * batch + j) % USERS
      ids.push(`u${n}`)
      names.push(`n${j}`)
      attrs.push(JSON.stringify({ score: 1, plan: j % 2 ? 'gold' : 'free' }))
    }
    await db.query(
      `INSERT INTO raw_profiles (external_id, first_name, custom_attributes)
       SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[])
       ON CONFLICT (external_id) DO UPDATE SET first_name = excluded.first_name,
         custom_attributes = raw_profiles.custom_attributes || excluded.custom_attributes`,
      [ids, names, attrs],
    )
  })
  const seconds = (performance.now() - started) / 1000
  await db.end()
  return Math.round((batches * batch) / seconds)
}

async function clickhouseInsert(batch: number): Promise<number> {
  const ch = openClickHouse({ dataDir: path.join(tempDir('uds-bench-raw-ch-'), 'clickhouse'), database: 'raw' })
  await ch.client.command({ query: 'CREATE DATABASE IF NOT EXISTS raw' })
  await ch.client.command({
    query: `CREATE TABLE raw.events (workspace_id String, profile_id UInt64, event_id String, kind LowCardinality(String), name String,
      app_id String, time DateTime64(3, 'UTC'), properties String, currency String, price Float64, quantity UInt32) ENGINE = MergeTree ORDER BY (workspace_id, profile_id)`,
  })
  const total = ROWS * 2
  const time = new Date().toISOString().replace('T', ' ').replace('Z', '')
  const started = performance.now()
  for (let b = 0; b * batch < total; b++) {
    const rows = Array.from({ length: Math.min(batch, total - b * batch) }, (_, j) => {
      const i = b * batch + j
      return {
        workspace_id: 'w', profile_id: i % USERS, event_id: `e${i}`, kind: i % 2 ? 'purchase' : 'event', name: 'played',
        app_id: '', time, properties: '{"level":1,"items":[{"id":1}]}', currency: 'USD', price: 1.5, quantity: 1,
      }
    })
    await ch.client.insert({ table: 'raw.events', values: rows, format: 'JSONEachRow' })
  }
  const seconds = (performance.now() - started) / 1000
  await ch.close()
  return Math.round(total / seconds)
}

async function main() {
  const pgPerRequestBatch = await postgresUpsert(PER_REQUEST, 8)
  const pgLargeBatch = await postgresUpsert(1000, 4)
  const chInsert = await clickhouseInsert(10_000)
  console.log(JSON.stringify({ rows: ROWS, pgUpsertRowsPerSecond: Math.max(pgPerRequestBatch, pgLargeBatch), pgPerRequestBatch, pgLargeBatch, chInsertRowsPerSecond: chInsert }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
