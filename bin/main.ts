import type { Server } from 'node:http'
import { createApp } from '../services/api/app.js'
import { apiDepsFrom } from '../services/api/deps.js'
import { startMetricsListener } from '../services/api/routes/metrics.js'
import { ensureAdminToken, ensureFirstStartCredentials } from '../services/bootstrap.js'
import { warnAboutPostgresVacuum } from '../services/postgres-check.js'
import { warnAboutRedisDurability } from '../services/redis-check.js'
import { watchStorageSettings } from '../services/storage-gauges.js'
import { clickhouseConnectionsFor } from '../shared/clickhouse/connections.js'
import { ConfigError, loadConfig } from '../shared/config.js'
import { createContext, type OpenClickHouse } from '../shared/context.js'
import { createLogger } from '../shared/logger.js'
import { createMetrics } from '../shared/metrics.js'
import { rolesUseClickHouse, WorkerRoles, type WorkerRole } from '../shared/queue/queues.js'
import { takeEngineSeat, type EngineSeat } from '../workers/engine/seat.js'
import { startWorkers, type RunningWorker } from '../workers/registry.js'

const SHUTDOWN_GRACE_MS = 15_000
/**
 * A request must never be cut off. Node closes a keep-alive connection after 5 s idle: a client
 * that reuses it at that instant (or whose own idle timer ran late) sees a reset. Clients and load
 * balancers keep idle connections up to about 60 s, so the server waits longer than they do;
 * the headers timeout stays above it, as Node requires for keep-alive.
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000
/**
 * Connections waiting to be accepted. Under a burst (or while the event loop is busy) Node's
 * default 511 overflows; the kernel then drops connection attempts or answers SYN cookies, some
 * of which end in a reset. The kernel caps this at net.core.somaxconn (4096 on current Linux).
 */
const LISTEN_BACKLOG = 4096

/**
 * `main.ts` (no args): API and every worker in one process, on the embedded ClickHouse.
 * `main.ts api`: the API tier alone (its ClickHouse reads go to the worker holding the embedded engine, or to
 * CLICKHOUSE_URL's server). `main.ts worker [track identity export callback]`.
 */
function parseRoles(argv: string[]): { api: boolean; workers: WorkerRole[] } {
  const [mode, ...rest] = argv
  if (!mode || mode === 'all') return { api: true, workers: WorkerRoles }
  if (mode === 'api') return { api: true, workers: [] }
  if (mode === 'worker') {
    const roles = rest.length ? rest : WorkerRoles
    const bad = roles.filter((r) => !WorkerRoles.includes(r as WorkerRole))
    if (bad.length) throw new ConfigError(`unknown worker queue(s): ${bad.join(', ')}; choose from ${WorkerRoles.join(', ')}`)
    return { api: false, workers: roles as WorkerRole[] }
  }
  throw new ConfigError(`unknown mode ${mode}: use api, worker [queues...] or nothing for everything`)
}

async function main() {
  const config = loadConfig()
  const roles = parseRoles(process.argv.slice(2))
  const logger = createLogger(config.LOG_LEVEL)
  // A stop asked for while starting (migrations, the embedded engine) is honoured once started, with exit 0.
  // One listener for the whole life of the process: removing a signal's last listener closes libuv's
  // handle for it, and a signal already caught but not yet dispatched to that handle is dropped.
  let stopAsked: string | undefined
  let shutdown: ((signal: string) => Promise<void>) | undefined
  const onSignal = (signal: string) => (shutdown ? void shutdown(signal) : (stopAsked = signal))
  process.on('SIGTERM', onSignal).on('SIGINT', onSignal)
  // A server (CLICKHOUSE_URL) is opened by every process that uses ClickHouse; the embedded engine
  // is held by one worker process, which the others (and API processes) reach through Redis.
  const workersUseClickHouse = rolesUseClickHouse(roles.workers)
  let seat: EngineSeat | undefined
  const openSeat: OpenClickHouse = async (parts) => (seat = await takeEngineSeat({ config, logger, ...parts })).clickhouse
  const clickhouse = config.CLICKHOUSE_URL ? workersUseClickHouse || roles.api : workersUseClickHouse && openSeat
  const ctx = await createContext(config, logger, {
    clickhouse,
    migrate: true,
    clickhouseConnections: clickhouseConnectionsFor({ ...roles, partitions: config.TRACK_PARTITIONS, concurrency: config.WORKER_CONCURRENCY }),
  })
  await warnAboutRedisDurability(ctx.redis, logger)
  await warnAboutPostgresVacuum(ctx.pg, logger)
  const metrics = createMetrics()
  metrics.setBacklogBounds({ all: config.TRACK_BACKLOG_MAX_OBJECTS, workspace: config.TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE })
  const storageGauges = watchStorageSettings(ctx, metrics)

  let workers: RunningWorker[] = []
  if (roles.workers.length) workers = await startWorkers(ctx, roles.workers, metrics, seat)

  // Worker-only processes have no HTTP server: METRICS_PORT gives SREs something to scrape.
  let metricsServer: Server | undefined
  if (config.METRICS_PORT !== undefined) {
    metricsServer = await startMetricsListener({ metrics, queues: ctx.queues, host: config.HOST, port: config.METRICS_PORT })
    logger.info({ host: config.HOST, port: config.METRICS_PORT }, 'metrics listener started (GET /metrics, no auth)')
  }

  let server: Server | undefined
  if (roles.api) {
    const admin = await ensureAdminToken(config)
    const first = await ensureFirstStartCredentials(ctx.pg, config, admin)
    const app = createApp(apiDepsFrom(ctx, metrics, admin.token))
    server = app.listen({ port: config.PORT, host: config.HOST, backlog: LISTEN_BACKLOG })
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS
    server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000
    await new Promise<void>((resolve, reject) => server!.once('listening', resolve).once('error', reject))
    const creds = first?.credentials
    // The credentials are shown once, on the first start; later starts say where they are.
    const banner = [
      `API listening on ${config.PUBLIC_URL}`,
      ...(creds && first.created
        ? [
            `admin token:   ${admin.token}${admin.generated ? `   (generated into ${config.DATA_DIR}/admin-token)` : '   (ADMIN_TOKEN)'}`,
            `workspace:     ${creds.workspace_name} (${creds.workspace_id})`,
            `API key:       ${creds.api_key}`,
            `SCIM token:    ${creds.scim_token}   (X-Request-Origin: ${creds.scim_request_origin})`,
            `(all in ${config.DATA_DIR}/credentials.json, readable by its owner only)`,
          ]
        : [`credentials:   ${creds ? `${config.DATA_DIR}/credentials.json` : 'none here (this database was set up elsewhere)'}; admin token: ${admin.generated || !config.ADMIN_TOKEN ? `${config.DATA_DIR}/admin-token` : 'ADMIN_TOKEN'}`]),
    ]
    console.log(banner.join('\n'))
  }
  const engine = seat ? (seat.holds() ? 'embedded (held here)' : 'embedded (through its holder)') : ctx.clickhouse ? 'server' : 'none'
  logger.info({ api: roles.api, workers: roles.workers, clickhouse: engine, deployment: ctx.deployment.id }, 'started')
  // A supervisor (make run's) waits for this before it starts the next process or says ready.
  process.send?.({ type: 'ready' })

  let stopping = false
  shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down: no new requests or jobs; finishing active ones')
    const force = setTimeout(() => {
      logger.warn('grace period over; exiting (unfinished jobs return to their queue when their lock expires)')
      process.exit(1)
    }, SHUTDOWN_GRACE_MS)
    force.unref()
    storageGauges.stop()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()))
    await Promise.all(workers.map((w) => w.close()))
    await ctx.close()
    process.exit(0)
  }
  if (stopAsked) void shutdown(stopAsked)
}

main().catch((e) => {
  // A bad setting, or parts of two deployments (DeploymentMismatchError): a restart repeats it.
  if (e instanceof ConfigError) {
    console.error(e.message)
    process.exit(2)
  }
  console.error(e)
  process.exit(1)
})
