import type { Redis } from 'ioredis'
import type { ClickHouseReads } from '../../shared/clickhouse/reads.js'
import type { Config } from '../../shared/config.js'
import type { Pool } from '../../shared/db/pool.js'
import type { Logger } from '../../shared/logger.js'
import type { Producer } from '../../shared/queue/jobs.js'
import type { QueueRegistry } from '../../shared/queue/queues.js'
import type { RequestTracker } from '../../shared/queue/request-tracker.js'
import type { Metrics } from '../../shared/metrics.js'
import type { Context } from '../../shared/context.js'
import { OperatorGeneration } from '../../shared/operator-changes.js'
import { RateLimits, WorkspaceCache } from './middleware/rate-limit.js'

/** What the API is built from; each route family declares the part it uses (`RouteFamily<Pick<ApiDeps, ...>>`). */
export interface ApiDeps {
  config: Config
  logger: Logger
  pg: Pool
  redis: Redis
  queues: QueueRegistry
  tracker: RequestTracker
  producer: Producer
  /** Cached operator settings are checked against it; operator writes announce through it. */
  operator: OperatorGeneration
  workspaces: WorkspaceCache
  rateLimits: RateLimits
  metrics: Metrics
  adminToken: string
  /** Segment sizes and readiness, in every layout (`shared/clickhouse/reads.ts`). */
  clickhouseReads: ClickHouseReads
}

/** The API's dependencies, built from a process's context. */
export function apiDepsFrom(ctx: Context, metrics: Metrics, adminToken: string): ApiDeps {
  const operator = new OperatorGeneration(ctx.redis, ctx.config.QUEUE_PREFIX)
  return {
    config: ctx.config,
    logger: ctx.logger,
    pg: ctx.pg,
    redis: ctx.redis,
    queues: ctx.queues,
    tracker: ctx.tracker,
    producer: { queues: ctx.queues, tracker: ctx.tracker },
    operator,
    workspaces: new WorkspaceCache(ctx.pg, operator),
    rateLimits: new RateLimits(ctx.redis, operator),
    metrics,
    adminToken,
    clickhouseReads: ctx.clickhouseReads,
  }
}
