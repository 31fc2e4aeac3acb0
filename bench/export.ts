// Segment export throughput and memory: seeds N users' snapshots straight into ClickHouse, then
// runs the export processor over a segment of all of them (local store: the files and the
// download link of an export without storage credentials).
// Usage: tsx bench/export.ts [users ...]   (default 100000 1000000). Prints one JSON line per size.
// The peak RSS is that of the process running the export alone.
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { loadConfig } from '../shared/config.js'
import { createContext, type Context } from '../shared/context.js'
import { createExport } from '../shared/db/repositories/export-repository.js'
import { createSegment } from '../shared/db/repositories/segment-repository.js'
import { createWorkspace } from '../shared/db/repositories/workspace-repository.js'
import { createLogger } from '../shared/logger.js'
import { createMetrics } from '../shared/metrics.js'
import { exportObjectPrefix } from '../shared/storage/export-layout.js'
import { createExportProcessor } from '../workers/export/processor.js'
import type { Job } from 'bullmq'
import { dbUrl } from './lib.js'

export interface ExportBenchResult {
  users: number
  seconds: number
  usersPerSecond: number
  peakRssMb: number
}

const root = path.resolve(import.meta.dirname, '..')
const databaseUrl = dbUrl

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`)
  await admin.end()
}

/** Runs `bench/export.ts <args>` in a child process; its last stdout line is its JSON report. */
async function runStep<T>(args: string[]): Promise<T> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench/export.ts'), ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: process.env,
  })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  const code = await new Promise((r) => child.once('exit', r))
  if (code !== 0) throw new Error(`bench/export.ts ${args.join(' ')} failed (${code}): ${out.slice(-2000)}`)
  const lines = out.trim().split('\n')
  return JSON.parse(lines[lines.length - 1]) as T
}

/**
 * Seeds in one child process and exports in another (the embedded engine lets one process hold
 * its data at a time), so the export's peak RSS holds nothing of the seeding.
 */
export async function benchExport(opts: { users: number }): Promise<ExportBenchResult> {
  const prepared = await runStep<Prepared>(['--seed', String(opts.users)])
  try {
    return await runStep<ExportBenchResult>(['--export', JSON.stringify(prepared)])
  } finally {
    await dropDatabase(prepared.dbName)
    rmSync(prepared.dataDir, { recursive: true, force: true })
  }
}

interface Prepared {
  users: number
  dbName: string
  dataDir: string
  workspaceId: string
  exportId: string
}

function benchConfig(dbName: string, dataDir: string) {
  return loadConfig({
    DATABASE_URL: databaseUrl(dbName),
    DATA_DIR: dataDir,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    QUEUE_PREFIX: 'udsbenchexport',
    LOG_LEVEL: 'warn',
  })
}

/**
 * N snapshot rows generated inside ClickHouse: records of the shape the track worker writes
 * (identifiers, names, a few custom attributes; about 500 bytes each), and each user's history:
 * 1 to 10 `played` events over the last 120 days and one purchase (5.5 million rows for a million
 * users), which the export reads its summaries from.
 */
async function seedSnapshots(ctx: Context, workspaceId: string, users: number): Promise<void> {
  const ch = ctx.clickhouse!
  await ch.client.command({
    query: `INSERT INTO ${ch.database}.profile_snapshots (workspace_id, profile_id, version, deleted, random_bucket, record)
            SELECT {ws:String}, number + 1, 1, 0, number % 10000,
              concat('{"created_at":"2024-01-01T00:00:00.000Z","external_id":"user-', toString(number),
                '","service_id":"', toString(generateUUIDv4(number)), '","random_bucket":', toString(number % 10000),
                ',"first_name":"First', toString(number), '","last_name":"Last","email":"user', toString(number),
                '@example.com","country":"FR","language":"fr","email_subscribe":"subscribed",',
                '"custom_attributes":{"plan":"', if(number % 2 = 0, 'gold', 'free'), '","visits":', toString(number % 97),
                ',"tags":["a","b"]}}')
              FROM numbers({n:UInt64})`,
    query_params: { ws: workspaceId, n: users },
  })
  await ch.client.command({
    query: `INSERT INTO ${ch.database}.events (workspace_id, profile_id, event_id, kind, name, app_id, time, properties, currency, price, quantity)
            SELECT {ws:String}, u + 1, concat(toString(u), '-', toString(k)), if(k = 0, 'purchase', 'event'), if(k = 0, 'sku-1', 'played'), '',
                   now64(3) - toIntervalSecond((u * 7919 + k * 104729) % (120 * 86400)), '{}', if(k = 0, 'USD', ''), if(k = 0, 9.99, 0), if(k = 0, 1, 0)
              FROM (SELECT number AS u FROM numbers({n:UInt64})) ARRAY JOIN range(toUInt64(u % 10 + 2)) AS k`,
    query_params: { ws: workspaceId, n: users },
  })
}

function peakRssMb(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))
  return m ? Math.round(Number(m[1]) / 1024) : Math.round(process.resourceUsage().maxRSS / 1024)
}

/** Step one: a fresh database, a segment of everyone, N snapshots and a queued export of them. */
async function seed(users: number): Promise<Prepared> {
  const dbName = `uds_bench_export_${users}`
  await dropDatabase(dbName)
  const dataDir = path.join(os.tmpdir(), `uds-bench-export-${users}-${process.pid}`)
  const config = benchConfig(dbName, dataDir)
  const ctx = await createContext(config, createLogger(config.LOG_LEVEL), { clickhouse: true, migrate: true })
  try {
    const ws = (await createWorkspace(ctx.pg, `bench-${randomUUID()}`))!
    const segment = (await createSegment(ctx.pg, { workspaceId: ws.id, name: 'everyone', filter: { all: [] } }))!
    await seedSnapshots(ctx, ws.id, users)
    const exportId = randomUUID()
    const objectPrefix = exportObjectPrefix({ kind: 'segment', ownerId: segment.id, startedAt: new Date(), uuid: randomUUID() })
    await createExport(ctx.pg, {
      id: exportId, workspaceId: ws.id, kind: 'segment', segmentId: segment.id, objectPrefix, maxActive: 100,
      request: { fields_to_export: [...EXPORTED_FIELDS], output_format: 'zip', destination: 'local' },
    })
    return { users, dbName, dataDir, workspaceId: ws.id, exportId }
  } finally {
    await ctx.close()
  }
}

const EXPORTED_FIELDS = ['external_id', 'service_id', 'first_name', 'last_name', 'email', 'country', 'custom_attributes', 'custom_events', 'purchases']

/** Step two: the export processor over the prepared segment, timed, in a process that did nothing else. */
async function runExport(p: Prepared): Promise<ExportBenchResult> {
  const config = benchConfig(p.dbName, p.dataDir)
  const logger = createLogger(config.LOG_LEVEL)
  const ctx = await createContext(config, logger, { clickhouse: true, migrate: false })
  try {
    const processor = createExportProcessor({ config, logger, pg: ctx.pg, clickhouse: ctx.clickhouse!, producer: { queues: ctx.queues, tracker: ctx.tracker }, metrics: createMetrics(), readsFirst: async () => {} })
    const started = process.hrtime.bigint()
    const outcome = await processor({ workspaceId: p.workspaceId, requestId: randomUUID(), exportId: p.exportId }, { attemptsMade: 0, opts: { attempts: 1 } } as Job)
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    if (outcome.status !== 'ok' || outcome.applied !== p.users) throw new Error(`export did not finish: ${JSON.stringify(outcome)}`)
    return { users: p.users, seconds: round(seconds), usersPerSecond: Math.round(p.users / seconds), peakRssMb: peakRssMb() }
  } finally {
    await ctx.close()
  }
}

const round = (n: number) => Math.round(n * 100) / 100

async function main() {
  const [step, arg] = process.argv.slice(2)
  if (step === '--seed') return console.log(JSON.stringify(await seed(Number(arg))))
  if (step === '--export') return console.log(JSON.stringify(await runExport(JSON.parse(arg) as Prepared)))
  const sizes = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [100_000, 1_000_000]
  for (const users of sizes) console.log(JSON.stringify({ bench: 'export', ...(await benchExport({ users })) }))
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
