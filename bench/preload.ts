// Realistic sizes for the benchmarks: one Postgres database and one embedded ClickHouse data
// directory filled with history before anything is measured. The schema is the service's own
// (it is started once on them, so its migrations run), then rows are generated inside each engine
// (generate_series, numbers()), without a JSON round trip, and the tables analyzed.
//
// Usage: tsx bench/preload.ts [--fresh] [events]
//   BENCH_PRELOAD_PROFILES (default 1,000,000) profiles: a tenth in the measured workspace
//   (external ids p1, p2, ...; the ingest and identity benchmarks send to it), the rest in another.
//   events (default BENCH_PRELOAD_EVENTS, 10,000,000) events and purchases spread over them.
// An existing preload with the same profiles and fewer events is topped up to `events`; anything
// else (or --fresh) starts again from an empty database. Prints one JSON line: the manifest and timings.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { openClickHouse } from '../shared/clickhouse/client.js'
import { loadConfig } from '../shared/config.js'
import { clickhouseDatabaseOf } from '../shared/context.js'
import { Permissions } from '../shared/domain/permissions.js'
import { adminToken, dbUrl, dropQueueKeys, freshDatabase, startService, stopService } from './lib.js'
import { round } from './load.js'

export interface Preloaded {
  databaseUrl: string
  dataDir: string
  adminToken: string
  /** The measured workspace: `profiles` of its own (external ids p1..pN), every rate limit lifted. */
  workspace: { id: string; key: string; profiles: number }
  otherWorkspaceId: string
  profiles: number
  events: number
}

const DIR = process.env.BENCH_PRELOAD_DIR ?? path.join(os.tmpdir(), 'uds-bench-preloaded')
const DB_NAME = process.env.BENCH_PRELOAD_DB ?? 'uds_bench_preloaded'
const MANIFEST = path.join(DIR, 'bench-preload.json')
const PROFILES = Number(process.env.BENCH_PRELOAD_PROFILES ?? 1_000_000)
const EVENTS = Number(process.env.BENCH_PRELOAD_EVENTS ?? 10_000_000)
/** Share of the profiles in the measured workspace; the rest make the other workspace. */
const MEASURED_SHARE = 0.1

export function readPreloaded(): Preloaded {
  if (!existsSync(MANIFEST)) throw new Error(`no preloaded database at ${DIR}: run \`npx tsx bench/preload.ts\` first`)
  return JSON.parse(readFileSync(MANIFEST, 'utf8')) as Preloaded
}

/** Service environment on the preloaded database, with a queue prefix of its own (dropped by the caller). */
export function serviceEnv(p: Preloaded): Record<string, string> {
  return { DATABASE_URL: p.databaseUrl, DATA_DIR: p.dataDir, QUEUE_PREFIX: `udsbench${randomBytes(3).toString('hex')}` }
}

/** Schema and workspaces: the service itself migrates an empty database and data directory. */
async function createSchema(): Promise<Preloaded> {
  rmSync(DIR, { recursive: true, force: true })
  const databaseUrl = await freshDatabase(DB_NAME)
  const env = { DATABASE_URL: databaseUrl, DATA_DIR: DIR, QUEUE_PREFIX: `udsbench${randomBytes(3).toString('hex')}` }
  const service = await startService([], env)
  try {
    const admin = adminToken(DIR)
    const call = async (method: string, p: string, body: unknown) => {
      const r = await fetch(`${service.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      if (!r.ok) throw new Error(`${method} ${p} answered ${r.status}: ${await r.text()}`)
      return (await r.json()) as Record<string, string>
    }
    const measured = await call('POST', '/admin/v1/workspaces', { name: 'bench-measured' })
    const other = await call('POST', '/admin/v1/workspaces', { name: 'bench-other' })
    const key = await call('POST', `/admin/v1/workspaces/${measured.id}/api_keys`, { name: 'bench', permissions: [...Permissions] })
    const lifted = { limit: 1e9, window_seconds: 1 }
    await call('PUT', `/admin/v1/workspaces/${measured.id}/rate_limits`, {
      default_per_hour: 1e9,
      endpoints: { '/users/track': lifted, '/users/merge': lifted, '/subscription/status/set': lifted, '/users/export/ids': lifted },
    })
    return {
      databaseUrl,
      dataDir: DIR,
      adminToken: admin,
      workspace: { id: measured.id, key: key.key, profiles: Math.round(PROFILES * MEASURED_SHARE) },
      otherWorkspaceId: other.id,
      profiles: PROFILES,
      events: 0,
    }
  } finally {
    await stopService(service)
    await dropQueueKeys(env.QUEUE_PREFIX)
  }
}

/**
 * Profiles 1..P (ids and external ids follow n: p<n> in the measured workspace, o<n> in the other);
 * their events are ClickHouse's (fillClickHouse), which their summaries are read from.
 */
async function fillPostgres(p: Preloaded, timings: Record<string, number>): Promise<void> {
  const db = new pg.Client({ connectionString: p.databaseUrl })
  await db.connect()
  try {
    await db.query('SET synchronous_commit = off')
    let t = performance.now()
    await db.query(
      `INSERT INTO profiles (id, workspace_id, service_id, external_id, email, first_name, last_name, country, language,
         email_subscribe, custom_attributes, random_bucket, created_at, updated_at, version)
       SELECT n, CASE WHEN n <= $1 THEN $2 ELSE $3 END, md5('svc' || n)::uuid::text,
         CASE WHEN n <= $1 THEN 'p' ELSE 'o' END || n, CASE WHEN n <= $1 THEN 'p' ELSE 'o' END || n || '@example.com',
         'First' || n, 'Last', (ARRAY['FR', 'US', 'DE', 'GB'])[n % 4 + 1], 'fr', 'subscribed',
         jsonb_build_object('plan', CASE WHEN n % 2 = 0 THEN 'gold' ELSE 'free' END, 'visits', n % 97, 'tags', jsonb_build_array('a', 'b')),
         n % 10000, now() - make_interval(secs => n % 31536000), now() - make_interval(secs => n % 86400), 1
       FROM generate_series(1, $4::bigint) AS n`,
      [p.workspace.profiles, p.workspace.id, p.otherWorkspaceId, p.profiles],
    )
    if (p.profiles > 0) await db.query(`SELECT setval('profiles_id_seq', $1)`, [p.profiles])
    timings.postgresProfiles = seconds(t)
    t = performance.now()
    await db.query('VACUUM (ANALYZE)')
    timings.postgresVacuumAnalyze = seconds(t)
  } finally {
    await db.end()
  }
}

export function openEngine(p: Preloaded) {
  const database = clickhouseDatabaseOf(loadConfig({ DATABASE_URL: p.databaseUrl, DATA_DIR: p.dataDir }))
  return openClickHouse({ dataDir: path.join(p.dataDir, 'clickhouse'), database })
}

/**
 * Events numbered from..to-1: event k belongs to profile k mod P + 1, and alternates between an
 * event and a purchase each time the numbering wraps around the profiles.
 */
async function addEvents(ch: ReturnType<typeof openEngine>, p: Preloaded, from: number, to: number): Promise<void> {
  if (to <= from || p.profiles === 0) return
  await ch.client.command({
    query: `INSERT INTO ${ch.database}.events (workspace_id, profile_id, event_id, kind, name, app_id, time, properties, currency, price, quantity)
            SELECT if(pid <= {measured:UInt64}, {ws:String}, {other:String}), pid, concat('pre-', toString(number)),
              if(purchase, 'purchase', 'event'), if(purchase, 'sku-1', 'played'), '',
              now64(3) - toIntervalSecond(number * 7919 % 31536000), concat('{"level":', toString(number % 10), '}'),
              if(purchase, 'USD', ''), if(purchase, 1.5, 0), if(purchase, 1, 0)
            FROM (SELECT number, number % {profiles:UInt64} + 1 AS pid, intDiv(number, {profiles:UInt64}) % 2 = 1 AS purchase
                  FROM numbers({from:UInt64}, {count:UInt64}))`,
    query_params: { measured: p.workspace.profiles, ws: p.workspace.id, other: p.otherWorkspaceId, profiles: p.profiles, from, count: to - from },
  })
}

/** One current snapshot per profile, of the shape the track worker writes. */
async function addSnapshots(ch: ReturnType<typeof openEngine>, p: Preloaded): Promise<void> {
  if (p.profiles === 0) return
  await ch.client.command({
    query: `INSERT INTO ${ch.database}.profile_snapshots (workspace_id, profile_id, version, deleted, random_bucket, record)
            SELECT if(n <= {measured:UInt64}, {ws:String}, {other:String}), n, 1, 0, n % 10000,
              concat('{"created_at":"2024-01-01T00:00:00.000Z","external_id":"', if(n <= {measured:UInt64}, 'p', 'o'), toString(n),
                '","service_id":"', lower(concat(substring(h, 1, 8), '-', substring(h, 9, 4), '-', substring(h, 13, 4), '-', substring(h, 17, 4), '-', substring(h, 21, 12))),
                '","random_bucket":', toString(n % 10000), ',"first_name":"First', toString(n), '","last_name":"Last","email":"',
                if(n <= {measured:UInt64}, 'p', 'o'), toString(n), '@example.com","country":"', ['FR', 'US', 'DE', 'GB'][n % 4 + 1], '","language":"fr","email_subscribe":"subscribed",',
                '"custom_attributes":{"plan":"', if(n % 2 = 0, 'gold', 'free'), '","visits":', toString(n % 97), ',"tags":["a","b"]},',
                '"custom_events":[{"name":"played","first":"2024-01-01T00:00:00.000Z","last":"2025-01-01T00:00:00.000Z","count":1}],',
                '"purchases":[{"name":"sku-1","first":"2024-02-01T00:00:00.000Z","last":"2024-02-01T00:00:00.000Z","count":1}]}')
            FROM (SELECT number + 1 AS n, hex(MD5(concat('svc', toString(number + 1)))) AS h FROM numbers({profiles:UInt64}))`,
    query_params: { measured: p.workspace.profiles, ws: p.workspace.id, other: p.otherWorkspaceId, profiles: p.profiles },
  })
}

/**
 * Merges the generated parts into few, as a long-lived table's would be: otherwise the service's
 * engine would spend the first minutes of a benchmark merging them in the background.
 */
async function settle(ch: ReturnType<typeof openEngine>): Promise<void> {
  await ch.client.command({ query: `OPTIMIZE TABLE ${ch.database}.events FINAL` })
  await ch.client.command({ query: `OPTIMIZE TABLE ${ch.database}.profile_snapshots FINAL` })
}

/** Events `from` .. `to` of the preload (and, with `snapshots`, every profile's snapshot), timed into `timings`. */
async function fillClickHouse(p: Preloaded, { from, to, snapshots }: { from: number; to: number; snapshots: boolean }, timings: Record<string, number>): Promise<void> {
  const ch = openEngine(p)
  try {
    let t = performance.now()
    if (snapshots) {
      await addSnapshots(ch, p)
      timings.clickhouseSnapshots = seconds(t)
      t = performance.now()
    }
    await addEvents(ch, p, from, to)
    timings.clickhouseEvents = seconds(t)
    t = performance.now()
    await settle(ch)
    timings.clickhouseOptimize = seconds(t)
  } finally {
    await ch.close()
  }
}

const seconds = (t: number) => round((performance.now() - t) / 1000)

async function main() {
  const args = process.argv.slice(2)
  const fresh = args.includes('--fresh')
  const events = Number(args.find((a) => !a.startsWith('--')) ?? EVENTS)
  const started = performance.now()
  const timings: Record<string, number> = {}
  let p = existsSync(MANIFEST) && !fresh ? readPreloaded() : undefined
  // A preload on another server (the bench's own Postgres or the machine's, BENCH_PG) is not this one.
  if (!p || p.databaseUrl !== dbUrl(DB_NAME) || p.profiles !== PROFILES || p.events > events) {
    const t = performance.now()
    const created = await createSchema()
    timings.schema = seconds(t)
    // Postgres works in its own processes, chDB in this one's threads: filled at the same time.
    await Promise.all([fillPostgres(created, timings), fillClickHouse(created, { from: 0, to: events, snapshots: true }, timings)])
    p = created
  } else if (p.events < events) {
    await fillClickHouse(p, { from: p.events, to: events, snapshots: false }, timings)
  }
  p = { ...p, events }
  writeFileSync(MANIFEST, `${JSON.stringify(p, null, 2)}\n`)
  console.log(JSON.stringify({ ...p, adminToken: undefined, workspace: { ...p.workspace, key: undefined }, seconds: seconds(started), timings }))
}

/** Drops the preloaded database and data directory. */
export async function dropPreloaded(): Promise<void> {
  await freshDatabase(DB_NAME)
  rmSync(DIR, { recursive: true, force: true })
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.dirname, 'preload.ts')) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
