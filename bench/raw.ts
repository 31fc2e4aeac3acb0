// The raw floor an ingest run is held against, measured in the same run: the rate of ONE Postgres connection
// upserting the ingest load's attribute rows in batches of 1,000 (INSERT ... ON CONFLICT merging
// jsonb), and of plain chDB inserts of its event and purchase rows in batches of 10,000.
// Usage: tsx bench/raw.ts [users] [mixed]. Prints one JSON line. With `mixed`, the rows are those of
// the mixed load (bench/mixed-load.ts): ~13-field attribute rows, 90% of them updating rows that
// exist before the clock starts (as the preloaded profiles do), and events with nested properties.
import path from 'node:path'
import pg from 'pg'
import { tsvLine } from '../shared/clickhouse/tsv.js'
import { openClickHouse } from '../shared/clickhouse/client.js'
import { rmSync } from 'node:fs'
import { freshDatabase, tempDir } from './lib.js'
import { ensureDatabase } from '../shared/db/migrate.js'
import { PER_KIND, requestsFor } from './ingest-load.js'
import { attributesOf, FIRST_NEW_USER, mixedBody, mixedUsers } from './mixed-load.js'

const USERS = Number(process.argv[2] ?? 100_000)
const MIXED = process.argv[3] === 'mixed'
const ROWS = requestsFor(USERS) * PER_KIND
const PG_BATCH = 1000
const CH_BATCH = 10_000
const DB = 'uds_bench_raw'

/** The attribute objects of the ingest load as rows: the user, a name, custom attributes merged into jsonb. */
async function postgresUpsert(): Promise<number> {
  const url = await freshDatabase(DB)
  await ensureDatabase(url)
  const db = new pg.Client({ connectionString: url })
  await db.connect()
  await db.query(`CREATE TABLE raw_profiles (workspace_id text NOT NULL, external_id text NOT NULL, first_name text,
    custom_attributes jsonb NOT NULL, PRIMARY KEY (workspace_id, external_id))`)
  // Built before the clock starts: the floor is the engine's rate, not this process's.
  const batches: [string[], string[], string[]][] = []
  for (let b = 0; b * PG_BATCH < ROWS; b++) {
    const ids: string[] = []
    const names: string[] = []
    const attrs: string[] = []
    for (let k = b * PG_BATCH; k < Math.min(ROWS, (b + 1) * PG_BATCH); k++) {
      const j = k % PER_KIND
      ids.push(`u${k % USERS}`)
      names.push(`n${j}`)
      attrs.push(JSON.stringify({ score: 1, plan: j % 2 ? 'gold' : 'free' }))
    }
    batches.push([ids, names, attrs])
  }
  const started = performance.now()
  for (const batch of batches) {
    await db.query(
      `INSERT INTO raw_profiles (workspace_id, external_id, first_name, custom_attributes)
       SELECT 'w', * FROM unnest($1::text[], $2::text[], $3::jsonb[])
       ON CONFLICT (workspace_id, external_id) DO UPDATE SET first_name = excluded.first_name,
         custom_attributes = raw_profiles.custom_attributes || excluded.custom_attributes`,
      batch,
    )
  }
  const seconds = (performance.now() - started) / 1000
  await db.end()
  await freshDatabase(DB) // drops it
  return Math.round(ROWS / seconds)
}

/** The event and purchase objects of the ingest load as rows of a table shaped like the service's events table. */
async function clickhouseInsert(): Promise<number> {
  const dir = tempDir('uds-bench-raw-ch-')
  const ch = openClickHouse({ dataDir: path.join(dir, 'clickhouse'), database: 'raw' })
  await ch.client.command({ query: 'CREATE DATABASE IF NOT EXISTS raw' })
  await ch.client.command({
    query: `CREATE TABLE raw.events (workspace_id String, profile_id UInt64, event_id String, kind LowCardinality(String), name String,
      app_id String, time DateTime64(3, 'UTC'), properties String, currency String, price Float64, quantity UInt32,
      inserted_at DateTime64(3, 'UTC') DEFAULT now64(3)) ENGINE = ReplacingMergeTree ORDER BY (workspace_id, profile_id, kind, name, event_id)`,
  })
  const total = ROWS * 2
  const time = new Date().toISOString().replace('T', ' ').replace('Z', '')
  const batches: Record<string, unknown>[][] = []
  const mixedRows = MIXED ? mixedEventRows() : []
  for (let b = 0; MIXED && b * CH_BATCH < total; b++) batches.push(mixedRows.slice(b * CH_BATCH, (b + 1) * CH_BATCH))
  for (let b = 0; !MIXED && b * CH_BATCH < total; b++) {
    batches.push(
      Array.from({ length: Math.min(CH_BATCH, total - b * CH_BATCH) }, (_, j) => {
        const i = b * CH_BATCH + j
        const purchase = i % 2 === 1
        return {
          workspace_id: 'w', profile_id: (i >> 1) % USERS, event_id: `e${i}`, kind: purchase ? 'purchase' : 'event', name: purchase ? 'sku-1' : 'played',
          app_id: '', time, properties: purchase ? '{}' : '{"level":1,"items":[{"id":1}]}', currency: purchase ? 'USD' : '', price: purchase ? 1.5 : 0, quantity: purchase ? 1 : 0,
        }
      }),
    )
  }
  // Formatted and inserted as the service does (TabSeparated text through the engine's raw insert), formatting timed.
  const columns = Object.keys(batches[0][0])
  const started = performance.now()
  for (const rows of batches) {
    await ch.insertTabSeparated({ table: 'raw.events', columns, body: rows.map((r) => tsvLine(columns.map((c) => r[c] as string | number))).join('') })
  }
  const seconds = (performance.now() - started) / 1000
  await ch.close()
  rmSync(dir, { recursive: true, force: true })
  return Math.round(total / seconds)
}

const MIXED_COLUMNS = ['first_name', 'last_name', 'home_city', 'country', 'language', 'email'] as const

/** The mixed load's attribute rows: upserted raw, a batch never naming a user twice (ON CONFLICT cannot touch a row twice). */
async function mixedPostgresUpsert(): Promise<number> {
  const url = await freshDatabase(DB)
  await ensureDatabase(url)
  const db = new pg.Client({ connectionString: url })
  await db.connect()
  await db.query(`CREATE TABLE raw_profiles (workspace_id text NOT NULL, external_id text NOT NULL, ${MIXED_COLUMNS.map((c) => `${c} text`).join(', ')},
    custom_attributes jsonb NOT NULL, PRIMARY KEY (workspace_id, external_id))`)
  const row = (u: number) => {
    const a = attributesOf(u, 'raw')
    const { first_name, last_name, home_city, country, language, email, ...custom } = a
    return [`u${u}`, first_name, last_name, home_city, country, language, email, JSON.stringify({ ...custom, tags: ['t0'] })]
  }
  const sql = `INSERT INTO raw_profiles (workspace_id, external_id, ${MIXED_COLUMNS.join(', ')}, custom_attributes)
    SELECT 'w', * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::jsonb[])
    ON CONFLICT (workspace_id, external_id) DO UPDATE SET ${MIXED_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')},
      custom_attributes = raw_profiles.custom_attributes || excluded.custom_attributes
        || jsonb_build_object('logins', coalesce((raw_profiles.custom_attributes->>'logins')::int, 0) + 1)`
  const columnsOf = (rows: string[][]) => rows[0].map((_, c) => rows.map((r) => r[c]))
  // The users that exist before the load, as the preloaded profiles do (not timed).
  for (let u = 0; u < FIRST_NEW_USER; u += PG_BATCH) {
    await db.query(sql, columnsOf(Array.from({ length: Math.min(PG_BATCH, FIRST_NEW_USER - u) }, (_, k) => row(u + k))))
  }
  await db.query('VACUUM ANALYZE raw_profiles')
  const batches: string[][][] = []
  let batch: string[][] = []
  let inBatch = new Set<number>()
  for (const r of mixedUsers(requestsFor(USERS))) {
    for (const u of r.attributeUsers) {
      if (batch.length === PG_BATCH || inBatch.has(u)) {
        batches.push(batch)
        batch = []
        inBatch = new Set()
      }
      batch.push(row(u))
      inBatch.add(u)
    }
  }
  if (batch.length) batches.push(batch)
  const started = performance.now()
  for (const b of batches) await db.query(sql, columnsOf(b))
  const seconds = (performance.now() - started) / 1000
  await db.end()
  await freshDatabase(DB)
  return Math.round(ROWS / seconds)
}

/** The mixed load's event and purchase objects as rows, their properties as the service stores them (JSON text). */
function mixedEventRows(): Record<string, unknown>[] {
  const time = new Date().toISOString().replace('T', ' ').replace('Z', '')
  const rows: Record<string, unknown>[] = []
  mixedUsers(requestsFor(USERS)).forEach((r, i) => {
    const body = JSON.parse(mixedBody(r, i, 'raw')) as { events: Record<string, unknown>[]; purchases: Record<string, unknown>[] }
    body.events.forEach((e, j) => {
      rows.push({ workspace_id: 'w', profile_id: r.eventUsers[j], event_id: `e${i}-${j}`, kind: 'event', name: e.name, app_id: e.app_id, time,
        properties: JSON.stringify(e.properties), currency: '', price: 0, quantity: 0 })
    })
    body.purchases.forEach((p, j) => {
      rows.push({ workspace_id: 'w', profile_id: r.purchaseUsers[j], event_id: `p${i}-${j}`, kind: 'purchase', name: p.product_id, app_id: p.app_id, time,
        properties: JSON.stringify(p.properties), currency: p.currency, price: p.price, quantity: p.quantity })
    })
  })
  return rows
}

async function main() {
  const pgUpsertRowsPerSecond = MIXED ? await mixedPostgresUpsert() : await postgresUpsert()
  const chInsertRowsPerSecond = await clickhouseInsert()
  console.log(JSON.stringify({ load: MIXED ? 'mixed' : 'ingest', attributeRows: ROWS, eventRows: ROWS * 2, pgBatch: PG_BATCH, chBatch: CH_BATCH, pgUpsertRowsPerSecond, chInsertRowsPerSecond }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
