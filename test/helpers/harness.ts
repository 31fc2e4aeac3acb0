import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { createApp } from '../../services/api/app.js'
import { apiDepsFrom } from '../../services/api/deps.js'
import { Redis } from 'ioredis'
import { clickHouseOver, openClickHouse, type ClickHouse } from '../../shared/clickhouse/client.js'
import { channelConnection, EngineChannel } from '../../shared/queue/engine-channel.js'
import { loadConfig, type Config } from '../../shared/config.js'
import { createContext, type Context } from '../../shared/context.js'
import { withDefaultUser } from '../../shared/db/pool.js'
import { ensureDatabase, migratePostgres } from '../../shared/db/migrate.js'
import { createLogger } from '../../shared/logger.js'
import { createMetrics, type Metrics } from '../../shared/metrics.js'
import type { Permission } from '../../shared/domain/permissions.js'
import { Permissions } from '../../shared/domain/permissions.js'
import type { WorkerRole } from '../../shared/queue/queues.js'
import { startWorkers, type RunningWorker } from '../../workers/registry.js'
import { sleep, until } from './wait.js'

const PG_BASE = process.env.TEST_DATABASE_URL ?? 'postgres://127.0.0.1:5432/postgres'
const TEST_DB_PREFIX = 'uds_test_'

export function dbUrl(name: string): string {
  const u = new URL(PG_BASE)
  u.pathname = `/${name}`
  return u.toString()
}

/** Migrate once into a template named after the migrations' content; each test file copies it. */
async function templateDatabase(): Promise<string> {
  const dir = path.resolve(import.meta.dirname, '../../infra/migrations/postgres')
  const hash = createHash('sha1')
  for (const f of readdirSync(dir).sort()) hash.update(f).update(readFileSync(path.join(dir, f)))
  const name = `${TEST_DB_PREFIX}template_${hash.digest('hex').slice(0, 12)}`
  await migratePostgres(dbUrl(name))
  return name
}

export async function createTestDatabase(): Promise<string> {
  const template = await templateDatabase()
  const name = `${TEST_DB_PREFIX}${randomBytes(6).toString('hex')}`
  for (let attempt = 0; ; attempt++) {
    try {
      await ensureDatabase(dbUrl(name), template)
      return name
    } catch (e) {
      // Another test process may still be connected to the template for a moment.
      if ((e as { code?: string }).code !== '55006' || attempt > 50) throw e
      await sleep(100 + Math.random() * 200)
    }
  }
}

/** Drops a database only when its name says it is a test database. */
export async function dropTestDatabase(name: string): Promise<void> {
  if (!name.startsWith(TEST_DB_PREFIX)) throw new Error(`refusing to drop ${name}: not a test database`)
  const client = new pg.Client({ connectionString: withDefaultUser(dbUrl('postgres')) })
  await client.connect()
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`)
  } finally {
    await client.end()
  }
}

let processClickHouse: ClickHouse | undefined
/** chDB allows one data directory per process: every test file in this process shares it, each with its own database. */
function sharedClickHouse(): ClickHouse {
  if (!processClickHouse) {
    const ch = openClickHouse({ dataDir: path.join(os.tmpdir(), `uds-test-chdb-${process.pid}`), database: 'unused' })
    processClickHouse = ch
  }
  return processClickHouse
}

export interface TestEnv {
  baseUrl: string
  adminToken: string
  config: Config
  ctx: Context
  metrics: Metrics
  clickhouse: ClickHouse
  dbName: string
  admin(method: string, path: string, body?: unknown): Promise<HttpResult>
  call(method: string, path: string, opts?: { key?: string; body?: unknown; headers?: Record<string, string> }): Promise<HttpResult>
  /** A new workspace and a key holding the given permissions (all by default). */
  workspace(permissions?: readonly Permission[]): Promise<{ id: string; key: string }>
  /** Polls GET /requests/{id} until it is done or failed. */
  waitForRequest(key: string, requestId: string, timeoutMs?: number): Promise<{ status: string; errors?: unknown[] }>
  /** POSTs a queued write and waits until its request is done; throws unless it was accepted and applied. */
  writeAndWait(key: string, path: string, body: unknown): Promise<{ response: any; progress: { status: string; errors?: unknown[] } }>
  /** POST /users/export/ids, which must answer 201. */
  readUsers(key: string, body: unknown): Promise<{ users: any[]; invalid_user_ids?: unknown[] }>
  startWorkers(roles?: WorkerRole[]): Promise<RunningWorker[]>
  close(): Promise<void>
}

export interface HttpResult {
  status: number
  headers: Headers
  body: any
  text: string
}

export async function request(baseUrl: string, method: string, p: string, opts: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {}): Promise<HttpResult> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) }
  if (opts.token) headers.authorization = `Bearer ${opts.token}`
  let body: string | undefined
  if (opts.raw !== undefined) body = opts.raw
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body)
    headers['content-type'] ??= 'application/json'
  }
  const res = await fetch(`${baseUrl}${p}`, { method, headers, body })
  const text = await res.text()
  let parsed: unknown
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  return { status: res.status, headers: res.headers, body: parsed, text }
}

/**
 * A whole service on real Postgres, Redis and chDB with its own database, queue prefix and
 * ClickHouse database, so test files never collide with each other or with `make run`.
 */
/**
 * `engine: false`: this process opens no ClickHouse, as an API process beside worker processes;
 * the worker processes a test spawns hold the engine, and `clickhouse` reaches it through them.
 * `clickhouse`: a ClickHouse of the caller's (a server), used on this env's database; the caller closes it.
 */
export async function startTestEnv(opts: { workers?: WorkerRole[]; env?: Record<string, string>; engine?: boolean; clickhouse?: ClickHouse } = {}): Promise<TestEnv> {
  const dbName = await createTestDatabase()
  // Listening first, so the configuration's PUBLIC_URL (download links) names the real port.
  const server = http.createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const adminToken = `test-admin-${randomBytes(12).toString('hex')}`
  const config = loadConfig({
    DATABASE_URL: dbUrl(dbName),
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    QUEUE_PREFIX: `udstest_${randomBytes(5).toString('hex')}`,
    ADMIN_TOKEN: adminToken,
    DATA_DIR: path.join(os.tmpdir(), `uds-test-data-${dbName}`),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    JOB_LOCK_MS: '5000',
    TRACK_PARTITIONS: '4',
    CALLBACK_ALLOW_PRIVATE: 'true',
    PORT: String((server.address() as AddressInfo).port),
    PUBLIC_URL: baseUrl,
    ...(opts.env ?? {}),
  })
  const logger = createLogger(config.LOG_LEVEL)
  let clickhouse: ClickHouse
  let ctx: Context
  let channel: EngineChannel | undefined
  if (opts.engine === false) {
    ctx = await createContext(config, logger, { clickhouse: false, migrate: true })
    channel = new EngineChannel(ctx.redis, new Redis(config.REDIS_URL, { maxRetriesPerRequest: null }), config.QUEUE_PREFIX)
    clickhouse = clickHouseOver({ database: dbName, insertIntervalMs: 0, connect: (lane) => channelConnection(channel!, lane) })
  } else {
    const ch = opts.clickhouse ?? sharedClickHouse()
    clickhouse = { ...ch, database: dbName, insertIntervalMs: config.CLICKHOUSE_INSERT_INTERVAL_MS, close: async () => {} }
    ctx = await createContext(config, logger, { clickhouse, migrate: true })
  }
  const metrics = createMetrics()
  const app = createApp(apiDepsFrom(ctx, metrics, adminToken))
  server.on('request', app)
  const workers: RunningWorker[] = []

  const env: TestEnv = {
    baseUrl,
    adminToken,
    config,
    ctx,
    metrics,
    clickhouse,
    dbName,
    admin: (method, p, body) => request(baseUrl, method, p, { token: adminToken, body }),
    call: (method, p, o = {}) => request(baseUrl, method, p, { token: o.key, body: o.body, headers: o.headers }),
    async workspace(permissions = Permissions) {
      const ws = await env.admin('POST', '/admin/v1/workspaces', { name: `ws-${randomBytes(4).toString('hex')}` })
      if (ws.status !== 201) throw new Error(`workspace: ${ws.status} ${ws.text}`)
      const key = await env.admin('POST', `/admin/v1/workspaces/${ws.body.id}/api_keys`, { name: 'test', permissions })
      if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`)
      return { id: ws.body.id as string, key: key.body.key as string }
    },
    async waitForRequest(key, requestId, timeoutMs = 30_000) {
      const progress = () => env.call('GET', `/requests/${requestId}`, { key })
      const finished = (r: HttpResult) => r.body?.status === 'done' || r.body?.status === 'failed'
      return (await until(`request ${requestId} to finish`, progress, finished, timeoutMs)).body
    },
    async writeAndWait(key, p, body) {
      const r = await env.call('POST', p, { key, body })
      if (r.status >= 300) throw new Error(`POST ${p}: ${r.status} ${r.text}`)
      const progress = await env.waitForRequest(key, r.headers.get('x-request-id')!)
      if (progress.status !== 'done') throw new Error(`POST ${p}: request ${progress.status} ${JSON.stringify(progress.errors)}`)
      return { response: r.body, progress }
    },
    async readUsers(key, body) {
      const r = await env.call('POST', '/users/export/ids', { key, body })
      if (r.status !== 201) throw new Error(`POST /users/export/ids: ${r.status} ${r.text}`)
      return r.body
    },
    async startWorkers(roles = ['track', 'identity', 'export', 'callback']) {
      const started = await startWorkers(ctx, roles, metrics)
      workers.push(...started)
      return started
    },
    async close() {
      await Promise.all(workers.map((w) => w.close(true)))
      await new Promise<void>((r) => server.close(() => r()))
      const keys = await ctx.redis.keys(`${config.QUEUE_PREFIX}:*`).catch(() => [] as string[])
      if (keys.length) await ctx.redis.del(...keys).catch(() => {})
      await channel?.close()
      await ctx.close()
      if (!channel) await clickhouse.client.command({ query: `DROP DATABASE IF EXISTS ${clickhouse.database}` }).catch(() => {})
      await dropTestDatabase(dbName)
    },
  }
  if (opts.workers?.length) await env.startWorkers(opts.workers)
  return env
}
