import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { trackLagSeconds } from './queue/lag.js'
import type { QueueRegistry } from './queue/queues.js'
import { RequestTracker, type BacklogState } from './queue/request-tracker.js'

/** Job states reported per queue; `waiting` includes jobs held back by an ordered queue's concurrency of one. */
const QueueStates = ['waiting', 'active', 'failed', 'delayed', 'completed'] as const
type QueueState = (typeof QueueStates)[number]

interface QueueCounts {
  family: string
  partition?: string
  counts: Record<QueueState, number>
  /** BullMQ workers connected to the queue, alive or not; undefined when Redis does not say. */
  workers?: number
}

/** `track-3` is partition 3 of the `track` family; other queues are their own family. */
/** A track partition queue's family and partition (`3`, or `g1-3` in a later layout generation); other queues are their own family. */
export function queueFamily(name: string): { family: string; partition?: string } {
  const m = /^(track)-((?:g\d+-)?\d+)$/.exec(name)
  return m ? { family: m[1], partition: m[2] } : { family: name }
}

/** What one scrape reads from Redis: counts per queue, lag per track partition, the track backlog. */
interface Readings {
  counts: QueueCounts[]
  lag: Map<string, number>
  backlog: BacklogState
}

async function readQueueState(queues: QueueRegistry, tracker: RequestTracker): Promise<Readings> {
  const [counts, lag, backlog, workers] = await Promise.all([
    Promise.all(
      queues.allNames().map(async (name) => {
        const counts = (await queues.get(name).getJobCounts(...QueueStates)) as Record<QueueState, number>
        return { ...queueFamily(name), counts, name }
      }),
    ),
    trackLagSeconds(queues),
    tracker.backlog(),
    queues.workerCounts(),
  ])
  return { counts: counts.map(({ name, ...q }) => ({ ...q, workers: workers?.get(name) })), lag, backlog }
}

/** Sums partitions into their family, so `track` shows the whole backlog next to each partition's. */
function sumByFamily(all: QueueCounts[]): Map<string, Record<QueueState, number>> {
  const totals = new Map<string, Record<QueueState, number>>()
  for (const q of all) {
    const sum = totals.get(q.family) ?? (Object.fromEntries(QueueStates.map((s) => [s, 0])) as Record<QueueState, number>)
    for (const s of QueueStates) sum[s] += q.counts[s] ?? 0
    totals.set(q.family, sum)
  }
  return totals
}

/** The track backlog's bounds (TRACK_BACKLOG_MAX_OBJECTS, ..._PER_WORKSPACE). */
export interface BacklogBounds {
  all: number
  workspace: number
}

/**
 * A workspace's backlog is reported by id once it holds this share of its bound, and only the
 * largest few: the alert on a workspace at its bound can name it while the series stay few.
 */
const NAMED_WORKSPACE_SHARE = 0.5
const NAMED_WORKSPACES_MAX = 10

/**
 * Prometheus metrics of one process. Labels never carry user data, keys, or workspace ids but on
 * `uds_track_backlog_workspace_objects` (the few workspaces near their backlog bound).
 */
export function createMetrics() {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })

  let watched: { queues: QueueRegistry; tracker: RequestTracker } | undefined
  let bounds: BacklogBounds | undefined
  // The queue gauges are collected concurrently on a scrape; they share one read of Redis.
  let inFlight: Promise<Readings | undefined> | undefined
  const queueErrors = new Counter({
    name: 'uds_queue_metrics_errors_total',
    help: 'Scrapes whose queue counts could not be read (Redis unreachable); the queue gauges are empty then',
    registers: [registry],
  })
  const currentState = () => {
    if (!watched) return Promise.resolve(undefined)
    inFlight ??= readQueueState(watched.queues, watched.tracker)
      .catch(() => {
        queueErrors.inc()
        return undefined
      })
      .finally(() => (inFlight = undefined))
    return inFlight
  }

  const rateLimited = new Counter({
    name: 'uds_rate_limit_rejections_total',
    help: 'Requests refused with 429, by bucket',
    labelNames: ['bucket'] as const,
    registers: [registry],
  })
  // From 0, so the alert on backlog refusals sees the first one.
  rateLimited.inc({ bucket: 'track_backlog' }, 0)
  const backlogLimit = new Gauge({
    name: 'uds_track_backlog_limit_objects',
    help: 'Bound of the track backlog past which /users/track answers 429: scope all (TRACK_BACKLOG_MAX_OBJECTS) or workspace (..._PER_WORKSPACE)',
    labelNames: ['scope'] as const,
    registers: [registry],
  })

  return {
    registry,
    /** Counts of `queues` are read on every scrape from now on (idempotent: the last registry wins). */
    watchQueues(queues: QueueRegistry) {
      // The backlog lives beside the queues: the same connection and prefix read it.
      watched = { queues, tracker: new RequestTracker(queues.connection, queues.prefix) }
    },
    /** The backlog's bounds, reported beside the backlog so an alert can compare the two. */
    setBacklogBounds(b: BacklogBounds) {
      bounds = b
      backlogLimit.set({ scope: 'all' }, b.all)
      backlogLimit.set({ scope: 'workspace' }, b.workspace)
    },
    httpRequests: new Counter({
      name: 'uds_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'uds_http_request_duration_seconds',
      help: 'HTTP request latency by route',
      labelNames: ['method', 'route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    rateLimited,
    jobs: new Counter({
      name: 'uds_jobs_total',
      help: 'Jobs finished by queue and outcome',
      labelNames: ['queue', 'outcome'] as const,
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'uds_job_duration_seconds',
      help: 'Job processing time by queue',
      labelNames: ['queue'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
      registers: [registry],
    }),
    requestDone: new Histogram({
      name: 'uds_request_done_seconds',
      help: 'Seconds from a request accepted (its jobs added to their queues) to its last job reported, by queue family of that job and status (done, failed)',
      labelNames: ['queue', 'status'] as const,
      // Around the ingestion objective (99% of track requests done within 5 s): 5 must be a bucket bound.
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    }),
    jobsStalled: new Counter({
      name: 'uds_jobs_stalled_total',
      help: 'Jobs whose lock expired (their worker died or hung) and went back to their queue, by queue family',
      labelNames: ['queue'] as const,
      registers: [registry],
    }),
    objectsApplied: new Counter({
      name: 'uds_objects_applied_total',
      help: 'Tracked objects (attributes, events, purchases) applied by workers',
      labelNames: ['queue'] as const,
      registers: [registry],
    }),
    exportRows: new Counter({ name: 'uds_export_rows_total', help: 'User records exported', registers: [registry] }),
    exportBytes: new Counter({ name: 'uds_export_bytes_total', help: 'Bytes of export files written', registers: [registry] }),
    queueJobs: new Gauge({
      name: 'uds_queue_jobs',
      help: 'Jobs per queue family and state, read from Redis on scrape; track sums its partitions',
      labelNames: ['queue', 'state'] as const,
      registers: [registry],
      async collect() {
        const all = (await currentState())?.counts
        this.reset()
        if (!all) return
        for (const [family, counts] of sumByFamily(all)) {
          for (const state of QueueStates) this.set({ queue: family, state }, counts[state])
        }
      },
    }),
    queuePartitionJobs: new Gauge({
      name: 'uds_queue_partition_jobs',
      help: 'Jobs per partition of a partitioned queue (track) and state, read from Redis on scrape',
      labelNames: ['queue', 'partition', 'state'] as const,
      registers: [registry],
      async collect() {
        const all = (await currentState())?.counts
        this.reset()
        for (const q of all ?? []) {
          if (q.partition === undefined) continue
          for (const state of QueueStates) this.set({ queue: q.family, partition: q.partition, state }, q.counts[state] ?? 0)
        }
      },
    }),
    queueWorkers: new Gauge({
      name: 'uds_queue_workers',
      help: 'BullMQ workers connected to a queue (a stopped but connected process still counts), by family and, for track, partition; read from Redis on scrape',
      labelNames: ['queue', 'partition'] as const,
      registers: [registry],
      async collect() {
        const all = (await currentState())?.counts
        this.reset()
        for (const q of all ?? []) {
          if (q.workers !== undefined) this.set({ queue: q.family, ...(q.partition === undefined ? {} : { partition: q.partition }) }, q.workers)
        }
      },
    }),
    queueLag: new Gauge({
      name: 'uds_queue_lag_seconds',
      help: 'Age of the oldest job of a track partition not yet applied (active or waiting), read from Redis on scrape; 0 when empty',
      labelNames: ['queue', 'partition'] as const,
      registers: [registry],
      async collect() {
        const lag = (await currentState())?.lag
        this.reset()
        lag?.forEach((seconds, queue) => this.set({ queue: 'track', partition: queueFamily(queue).partition ?? queue }, seconds))
      },
    }),
    trackBacklog: new Gauge({
      name: 'uds_track_backlog_objects',
      help: 'Objects of accepted track work (attributes, events, purchases, subscription and email state changes) not applied yet, in all',
      registers: [registry],
      async collect() {
        const backlog = (await currentState())?.backlog
        this.reset()
        if (backlog) this.set(backlog.all)
      },
    }),
    trackBacklogLargestWorkspace: new Gauge({
      name: 'uds_track_backlog_workspace_max_objects',
      help: 'Track backlog objects of the workspace holding the most (per workspace: GET /admin/queues/backlog)',
      registers: [registry],
      async collect() {
        const backlog = (await currentState())?.backlog
        this.reset()
        if (backlog) this.set(Math.max(0, ...backlog.byWorkspace.values()))
      },
    }),
    trackBacklogNamedWorkspaces: new Gauge({
      name: 'uds_track_backlog_workspace_objects',
      help: `Track backlog objects of each workspace holding at least ${NAMED_WORKSPACE_SHARE * 100}% of its bound (the ${NAMED_WORKSPACES_MAX} largest)`,
      labelNames: ['workspace'] as const,
      registers: [registry],
      async collect() {
        const backlog = (await currentState())?.backlog
        this.reset()
        if (!backlog || !bounds) return
        const near = [...backlog.byWorkspace].filter(([, n]) => n >= bounds!.workspace * NAMED_WORKSPACE_SHARE)
        near.sort((a, b) => b[1] - a[1])
        for (const [workspace, n] of near.slice(0, NAMED_WORKSPACES_MAX)) this.set({ workspace }, n)
      },
    }),
    trackBacklogWorkspaces: new Gauge({
      name: 'uds_track_backlog_workspaces',
      help: 'Workspaces holding track backlog',
      registers: [registry],
      async collect() {
        const backlog = (await currentState())?.backlog
        this.reset()
        if (backlog) this.set(backlog.byWorkspace.size)
      },
    }),
    // Settings of the stores, refreshed periodically (services/storage-gauges.ts); absent while
    // unreadable. Labelled by the server (never a label-less 0, which would read as "off").
    redisAofEnabled: new Gauge({
      name: 'uds_redis_aof_enabled',
      help: 'Whether Redis appends every write to its AOF (appendonly yes): 1 or 0, by server (host:port)',
      labelNames: ['redis'] as const,
      registers: [registry],
    }),
    redisEvicting: new Gauge({
      name: 'uds_redis_maxmemory_policy_evicting',
      help: 'Whether Redis may evict keys when full (maxmemory-policy other than noeviction): 1 or 0, by server and policy',
      labelNames: ['redis', 'policy'] as const,
      registers: [registry],
    }),
    postgresAutovacuum: new Gauge({
      name: 'uds_postgres_autovacuum_enabled',
      help: 'Whether the Postgres autovacuum daemon runs (autovacuum and track_counts on): 1 or 0, by database (host:port/name)',
      labelNames: ['database'] as const,
      registers: [registry],
    }),
    postgresDeadRows: new Gauge({
      name: 'uds_postgres_dead_rows',
      help: 'Dead row estimate of each hot table (pg_stat_user_tables.n_dead_tup)',
      labelNames: ['database', 'table'] as const,
      registers: [registry],
    }),
    postgresDeadRowRatio: new Gauge({
      name: 'uds_postgres_dead_row_ratio',
      help: 'Dead rows over all rows (live and dead) of each hot table',
      labelNames: ['database', 'table'] as const,
      registers: [registry],
    }),
  }
}
export type Metrics = ReturnType<typeof createMetrics>
