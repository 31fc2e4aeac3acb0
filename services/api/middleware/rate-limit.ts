import type { NextFunction, Request, Response } from 'express'
import type { Redis } from 'ioredis'
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { getWorkspace, type Workspace } from '../../../shared/db/repositories/workspace-repository.js'
import type { Pool } from '../../../shared/db/pool.js'
import { bucketFor, type Bucket } from '../../../shared/domain/rate-limits.js'
import { ApiError } from '../../../shared/errors.js'

const SETTINGS_CACHE_MS = 1000

/** Workspace rows (rate limits, storage settings) cached for a second on the hot path. */
export class WorkspaceCache {
  private readonly cache = new Map<string, { at: number; ws: Workspace | undefined }>()
  constructor(private readonly pg: Pool) {}

  async get(id: string): Promise<Workspace | undefined> {
    const hit = this.cache.get(id)
    if (hit && Date.now() - hit.at < SETTINGS_CACHE_MS) return hit.ws
    const ws = await getWorkspace(this.pg, id)
    this.cache.set(id, { at: Date.now(), ws })
    return ws
  }
}

/** Atomic per-workspace counters in Redis (rate-limiter-flexible), one limiter per bucket setting. */
export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterRedis>()

  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  private limiter(b: Bucket): RateLimiterRedis {
    const id = `${b.name}:${b.limit}:${b.windowSeconds}`
    let l = this.limiters.get(id)
    if (!l) {
      l = new RateLimiterRedis({
        storeClient: this.redis,
        keyPrefix: `${this.prefix}:rl:${id}`,
        points: b.limit,
        duration: b.windowSeconds,
        useRedisPackage: false,
      })
      this.limiters.set(id, l)
    }
    return l
  }

  /** Consumes one request; sets the X-RateLimit-* headers; throws 429 past the limit, 503 without Redis. */
  async consume(res: Response, bucket: Bucket, key: string): Promise<void> {
    let result: RateLimiterRes
    let limited = false
    try {
      result = await this.limiter(bucket).consume(key, 1)
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) {
        throw new ApiError(503, 'rate_limiter_unavailable', 'the service cannot accept requests right now (Redis unavailable)')
      }
      result = e
      limited = true
    }
    const resetAt = Math.ceil((Date.now() + result.msBeforeNext) / 1000)
    res.setHeader('X-RateLimit-Limit', String(bucket.limit))
    res.setHeader('X-RateLimit-Remaining', String(Math.max(0, result.remainingPoints)))
    res.setHeader('X-RateLimit-Reset', String(resetAt))
    if (limited) {
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(result.msBeforeNext / 1000))))
      throw new ApiError(429, 'rate_limited', 'rate limit reached: too many requests in this period')
    }
  }
}

/** Per-workspace limit for the request's path, applied once the API key is known. */
export function rateLimitApi(limits: RateLimits, workspaces: WorkspaceCache, onLimited?: (bucket: string) => void) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const auth = res.locals.auth!
    const ws = await workspaces.get(auth.workspaceId)
    // The matched route, not the raw path: `/USERS/TRACK/` reaches the same handler and must count in the same bucket.
    const path = req.route ? `${req.baseUrl}${req.route.path}` : req.path
    const bucket = bucketFor(path, ws?.rate_limits ?? {})
    try {
      await limits.consume(res, bucket, auth.workspaceId)
    } catch (e) {
      if ((e as ApiError).status === 429) onLimited?.(bucket.name)
      throw e
    }
    next()
  }
}
