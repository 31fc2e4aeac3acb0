import { z } from 'zod'

const bool = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1')

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max)

const ConfigSchema = z.object({
  PORT: int(0, 65535).default(3000),
  // Unset: no separate metrics listener. Set: this process also serves GET /metrics, without auth, on HOST:METRICS_PORT.
  METRICS_PORT: int(0, 65535).optional(),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().url().default('postgres://127.0.0.1:5432/userdata'),
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  CLICKHOUSE_URL: z.string().url().optional(),
  // A cluster named in the server's remote_servers: the history tables become Replicated tables on every node behind
  // Distributed tables sharded by profile (docs/clickhouse.md). Needs CLICKHOUSE_URL.
  CLICKHOUSE_CLUSTER: z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/, 'letters, digits, _, - and . only').max(128).optional(),
  // An API process without ClickHouse asks the worker holding the embedded engine; past this it answers 503.
  CLICKHOUSE_READ_TIMEOUT_MS: int(100, 60_000).default(5_000),
  // At most one ClickHouse insert per table this often, rows arriving meanwhile joining the next: fewer inserts (each
  // costs the engine ~6-10 ms of CPU however few its rows) for up to this much more on a request's time to `done`.
  // 0 by default on the embedded engine: 100 ms saved the worker a fifth of its CPU per small request, but put
  // accepted -> done during a history sweep past its 250 ms p99 goal. On a server, where many worker processes
  // insert into one table, 100 by default (SERVER_INSERT_INTERVAL_MS).
  CLICKHOUSE_INSERT_INTERVAL_MS: int(0, 10_000).optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  PUBLIC_URL: z.string().url().optional(),
  CALLBACK_ALLOW_PRIVATE: bool.default(false),
  QUEUE_PREFIX: z.string().regex(/^[a-zA-Z0-9_-]+$/, 'letters, digits, - and _ only').default('uds'),
  // 4: the fastest measured on 2 cores (bench/ingest.ts); more partitions let more worker processes apply in parallel.
  TRACK_PARTITIONS: int(1, 256).default(4),
  WORKER_CONCURRENCY: int(1, 64).default(4),
  // Objects one track batch may hold (one transaction, one ClickHouse part): larger pays those once per more jobs,
  // smaller keeps one batch's latency low. Events write and lock no Postgres row, so a batch's fixed costs weigh
  // most: 30,000 applied the mixed load of make bench ~12% faster than 10,000.
  TRACK_BATCH_MAX_OBJECTS: int(1, 100_000).default(30_000),
  JOB_LOCK_MS: int(1000, 600_000).default(30_000),
  // How long a synchronous endpoint (/users/track/sync, /users/external_ids/*) waits for its queued work to apply
  // before it answers 202 with the request id instead (docs/identity.md).
  SYNC_WAIT_MS: int(100, 120_000).default(10_000),
  // Accepted-but-unapplied track objects; past either bound /users/track answers 429. Measured Redis cost:
  // ~260 B an object in full-size requests, ~1.5 KB in one-object requests (docs/operations.md). At least
  // 225 (one full request).
  TRACK_BACKLOG_MAX_OBJECTS: int(225, 100_000_000).default(800_000),
  TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE: int(225, 100_000_000).default(400_000),
  // The identity worker's history sweep (docs/identity.md): how long merges and deletes wait before one pass squashes
  // them into the event history and erases deleted users' rows, and the bound promised for erasure (at least twice that).
  IDENTITY_SWEEP_SECONDS: int(1, 86_400).default(300),
  ERASURE_MAX_DELAY_SECONDS: int(2, 30 * 86_400).default(3600),
  // The exactly-once ledger keeps a completed job's row this long, so a replay of the job is skipped. At least 8 days:
  // longer than a job can come back (a stalled one once its lock expires; a failed one retried by hand while BullMQ
  // keeps it, 7 days) and than the 24 h Idempotency-Key window (whose repeats make no job). Pruned every LEDGER_PRUNE_SECONDS.
  LEDGER_RETENTION_SECONDS: int(8 * 86_400, 365 * 86_400).default(8 * 86_400),
  LEDGER_PRUNE_SECONDS: int(1, 86_400).default(3600),
  EXPORT_URL_TTL_SECONDS: int(60, 7 * 86400).default(4 * 3600),
  EXPORT_USERS_PER_FILE: int(1, 1_000_000).default(5000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})
  .refine((c) => c.IDENTITY_SWEEP_SECONDS * 2 <= c.ERASURE_MAX_DELAY_SECONDS, {
    path: ['IDENTITY_SWEEP_SECONDS'],
    message: 'must be at most half of ERASURE_MAX_DELAY_SECONDS',
  })
  .refine((c) => !c.CLICKHOUSE_CLUSTER || c.CLICKHOUSE_URL, {
    path: ['CLICKHOUSE_CLUSTER'],
    message: 'needs CLICKHOUSE_URL (a cluster is reached through one of its servers)',
  })

/**
 * Each worker process inserts into a table at most this often by default when ClickHouse is a
 * server: a server takes the inserts of every worker process, and each insert is a part to merge,
 * so processes inserting as soon as their last insert finished multiply parts by their number
 * (too many parts stop inserts). At most 10 inserts a second per table and process, for up to
 * 100 ms more on a request's time to `done`.
 */
export const SERVER_INSERT_INTERVAL_MS = 100

export type Config = Omit<z.infer<typeof ConfigSchema>, 'CLICKHOUSE_INSERT_INTERVAL_MS'> & { PUBLIC_URL: string; CLICKHOUSE_INSERT_INTERVAL_MS: number }

export class ConfigError extends Error {}

/** Parses the environment once; every bad variable is named in one message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const parsed = ConfigSchema.safeParse(present)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`)
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`)
  }
  const c = parsed.data
  return {
    ...c,
    PUBLIC_URL: (c.PUBLIC_URL ?? `http://${c.HOST}:${c.PORT}`).replace(/\/$/, ''),
    CLICKHOUSE_INSERT_INTERVAL_MS: c.CLICKHOUSE_INSERT_INTERVAL_MS ?? (c.CLICKHOUSE_URL ? SERVER_INSERT_INTERVAL_MS : 0),
  }
}
