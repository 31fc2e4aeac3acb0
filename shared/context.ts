import path from 'node:path'
import type { Redis } from 'ioredis'
import { openClickHouse, type ClickHouse } from './clickhouse/client.js'
import { directReads, type ClickHouseReads } from './clickhouse/reads.js'
import { migrateClickHouse } from './clickhouse/migrate.js'
import { learnServer } from './clickhouse/server.js'
import type { Config } from './config.js'
import { migratePostgres } from './db/migrate.js'
import { createPool, type Pool } from './db/pool.js'
import { withClickHouseMigrationLock } from './db/repositories/clickhouse-migration-lock-repository.js'
import { bindClickHouse, bindDeployment, shownUrl, type Deployment } from './deployment.js'
import type { Logger } from './logger.js'
import { connectFailFast, patientConnection } from './redis-connections.js'
import { RemoteClickHouseReads } from './queue/clickhouse-reads.js'
import { QueueRegistry } from './queue/queues.js'
import { TrackLayouts } from './queue/track-layout.js'
import { RequestTracker } from './queue/request-tracker.js'

/** Every long-lived connection of one process, built once at start and handed out piecemeal. */
export interface Context {
  config: Config
  logger: Logger
  pg: Pool
  /** The deployment this process's Postgres, Redis prefix and ClickHouse were found to belong to. */
  deployment: Deployment
  /** Fails fast while Redis is away, so the API can answer 503 instead of hanging. */
  redis: Redis
  queues: QueueRegistry
  tracker: RequestTracker
  /** Present in processes that run ClickHouse-backed workers, and in every process when CLICKHOUSE_URL names a server. */
  clickhouse?: ClickHouse
  /** ClickHouse answers in any process: on `clickhouse` when held here, else asked of the worker holding the embedded engine. */
  clickhouseReads: ClickHouseReads
  /** A connection for BullMQ workers (they need unlimited retries per request). */
  workerRedis(): Redis
  close(): Promise<void>
}

export function clickhouseDatabaseOf(config: Config): string {
  const name = new URL(config.DATABASE_URL).pathname.slice(1)
  return name.replace(/[^a-zA-Z0-9_]/g, '_') || 'userdata'
}

/**
 * Readies a ClickHouse this process opened: its migrations, one process at a time (a Postgres
 * lock), each skipped one logged; without migrations, what the server is (its version, a cluster's shape).
 */
export async function prepareClickHouse(ch: ClickHouse, deps: { pg: Pool; logger: Logger; migrate: boolean }): Promise<void> {
  if (!deps.migrate) {
    if (ch.cluster) await learnServer(ch)
    return
  }
  const outcomes = await migrateClickHouse(ch, { serialize: (fn) => withClickHouseMigrationLock(deps.pg, fn) })
  for (const m of outcomes.filter((o) => o.skipped)) deps.logger.warn({ migration: m.file, outcome: m.outcome }, 'ClickHouse migration skipped on this server')
}

/** Opens the embedded engine's seat for a worker process (workers/engine/seat.ts), given the rest of the context. */
export type OpenClickHouse = (parts: { pg: Pool; redis: Redis; deployment: Deployment }) => Promise<ClickHouse>

/**
 * `clickhouse`: false for none (the API asks the engine's holder), true for CLICKHOUSE_URL's
 * server, a ClickHouse already open (tests), or how to open one (a worker process's engine seat).
 * Every process binds its parts to one deployment first, and refuses to start if they disagree.
 */
export async function createContext(
  config: Config,
  logger: Logger,
  opts: { clickhouse: boolean | ClickHouse | OpenClickHouse; migrate: boolean; clickhouseConnections?: number },
): Promise<Context> {
  if (opts.migrate) await migratePostgres(config.DATABASE_URL)
  const pg = createPool(config.DATABASE_URL)
  // Our own commands (rate limits, request progress, operator changes) from concurrent requests
  // leave in one write per event-loop turn: a socket write is a system call, dear on small VMs,
  // and a small track request made three. Not on BullMQ's connection: Bull users report lost job
  // data with auto-pipelining there (OptimalBits/bull#2276).
  const redis = await connectFailFast(config.REDIS_URL, { autoPipelining: true })
  // BullMQ defines its ~40 Lua scripts on the connection it is given, and ioredis copies every
  // defined script onto each pipeline it creates: on a connection of their own, the queues leave the
  // tracker's and rate limiter's pipelines cheap (measured: the copy was the API's top self time).
  const queueRedis = await connectFailFast(config.REDIS_URL)
  const workerConnections: Redis[] = []
  const deployment = await bindDeployment({ pg, redis, config })
  let clickhouse: ClickHouse | undefined
  if (typeof opts.clickhouse === 'function') {
    clickhouse = await opts.clickhouse({ pg, redis, deployment })
  } else if (opts.clickhouse) {
    const given = typeof opts.clickhouse === 'object'
    clickhouse = given
      ? (opts.clickhouse as ClickHouse)
      : openClickHouse({
          url: config.CLICKHOUSE_URL,
          dataDir: path.resolve(config.DATA_DIR, 'clickhouse'),
          database: clickhouseDatabaseOf(config),
          insertIntervalMs: config.CLICKHOUSE_INSERT_INTERVAL_MS,
          cluster: config.CLICKHOUSE_CLUSTER,
          maxOpenConnections: opts.clickhouseConnections,
        })
    await prepareClickHouse(clickhouse, { pg, logger, migrate: opts.migrate })
    const where = config.CLICKHOUSE_URL && !given ? `CLICKHOUSE_URL ${shownUrl(config.CLICKHOUSE_URL)}` : `DATA_DIR ${clickhouse.dataDir}`
    await bindClickHouse(clickhouse, deployment, { pg, where })
  }
  let remoteReads: RemoteClickHouseReads | undefined
  if (!clickhouse) {
    const subscriber = patientConnection(config.REDIS_URL)
    remoteReads = await RemoteClickHouseReads.connect({ redis, subscriber, prefix: config.QUEUE_PREFIX, timeoutMs: config.CLICKHOUSE_READ_TIMEOUT_MS })
  }
  const layouts = await TrackLayouts.open(redis, config.QUEUE_PREFIX, config.TRACK_PARTITIONS)
  const layout = layouts.current()
  if (process.env.TRACK_PARTITIONS && layout.partitions !== config.TRACK_PARTITIONS && !layout.previous) {
    logger.warn(
      { configured: config.TRACK_PARTITIONS, running: layout.partitions },
      'TRACK_PARTITIONS differs from the partitions this deployment runs: it only sets a new deployment\'s; change them with `npm run cli -- partitions set <n>`',
    )
  }
  const queues = new QueueRegistry(queueRedis, config.QUEUE_PREFIX, layouts)
  return {
    config,
    logger,
    pg,
    deployment,
    redis,
    queues,
    tracker: new RequestTracker(redis, config.QUEUE_PREFIX),
    clickhouse,
    clickhouseReads: clickhouse ? directReads(clickhouse) : remoteReads!,
    workerRedis() {
      const r = patientConnection(config.REDIS_URL)
      workerConnections.push(r)
      return r
    },
    async close() {
      await remoteReads?.close()
      layouts.close()
      await queues.close()
      await Promise.all(workerConnections.map((r) => r.quit().catch(() => r.disconnect())))
      await queueRedis.quit().catch(() => queueRedis.disconnect())
      await redis.quit().catch(() => redis.disconnect())
      await pg.end()
      await clickhouse?.close()
    },
  }
}
