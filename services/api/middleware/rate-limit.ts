import type { NextFunction, Request, Response } from 'express'
import type { Redis } from 'ioredis'
import { getWorkspace, listBlockedExternalIds, type Workspace } from '../../../shared/db/repositories/workspace-repository.js'
import type { Pool } from '../../../shared/db/pool.js'
import { bucketFor, ScimBucket, type Bucket } from '../../../shared/domain/rate-limits.js'
import { ApiError } from '../../../shared/errors.js'
import { redisScript } from '../../../shared/redis-script.js'
import { CoherentCache, MAX_REREADS, unsettled, type OperatorGeneration, type Tagged } from '../../../shared/operator-changes.js'
import { bearerToken, invalidApiKey, type ApiKeyAuthenticator } from './auth.js'

export interface WorkspaceSettings {
  /** Undefined once the workspace is gone. */
  workspace: Workspace | undefined
  blockedExternalIds: ReadonlySet<string>
}

const NONE: ReadonlySet<string> = new Set()

/** Workspace rows (rate limits, storage settings) and blocked external ids, cached coherently per process. */
export class WorkspaceCache {
  private readonly cache: CoherentCache<WorkspaceSettings>

  constructor(pg: Pool, generation: OperatorGeneration) {
    this.cache = new CoherentCache(generation, async (id) => {
      const workspace = await getWorkspace(pg, id)
      const blocked = workspace?.has_blocked_external_ids ? new Set(await listBlockedExternalIds(pg, id)) : NONE
      return { workspace, blockedExternalIds: blocked }
    })
  }

  lookup(id: string): Promise<Tagged<WorkspaceSettings>> {
    return this.cache.get(id)
  }

  async get(id: string): Promise<Workspace | undefined> {
    return (await this.cache.get(id)).value.workspace
  }

  /** Whether the workspace blocks any of these external ids, from memory. */
  async anyBlocked(id: string, externalIds: Iterable<string>): Promise<boolean> {
    const { blockedExternalIds } = (await this.cache.get(id)).value
    if (blockedExternalIds.size === 0) return false
    for (const x of externalIds) if (blockedExternalIds.has(x)) return true
    return false
  }
}

/**
 * A fixed window per key, as rate-limiter-flexible counted it (same keys, so counts carry over an
 * upgrade), counted only when the caller's operator generation is still the one in Redis: the
 * coherence check costs no round trip of its own. KEYS: counter, generation. ARGV: window seconds,
 * 'check' or '', the expected generation. Returns {count, ms left in the window, generation}, count
 * -1 when the generation moved (nothing counted).
 */
const CONSUME = `
local generation = redis.call('GET', KEYS[2]) or ''
if ARGV[2] == 'check' and generation ~= ARGV[3] then return {-1, 0, generation} end
redis.call('SET', KEYS[1], 0, 'EX', ARGV[1], 'NX')
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = 1000 * ARGV[1]
end
return {count, ttl, generation}`
const consumeScript = redisScript(CONSUME)

export type Consumed = 'counted' | 'stale'

/** Atomic per-workspace counters in Redis, one per bucket setting. */
export class RateLimits {
  constructor(
    private readonly redis: Redis,
    private readonly generation: OperatorGeneration,
  ) {}

  /**
   * Counts one request and sets the X-RateLimit-* headers; throws 429 past the limit, 503 without
   * Redis. With `generation`, counts only while it is current, else answers 'stale' and sets nothing.
   */
  async consume(res: Response, bucket: Bucket, key: string, generation?: string): Promise<Consumed> {
    const counter = `${this.generation.prefix}:rl:${bucket.name}:${bucket.limit}:${bucket.windowSeconds}:${key}`
    let result: [number, number, string]
    try {
      const args = [String(bucket.windowSeconds), generation === undefined ? '' : 'check', generation ?? '']
      result = (await consumeScript(this.redis, [counter, this.generation.key], args)) as typeof result
    } catch {
      throw new ApiError(503, 'rate_limiter_unavailable', 'the service cannot accept requests right now (Redis unavailable)')
    }
    const [count, msLeft, current] = result
    this.generation.observe(current)
    if (count === -1) return 'stale'
    res.setHeader('X-RateLimit-Limit', String(bucket.limit))
    res.setHeader('X-RateLimit-Remaining', String(Math.max(0, bucket.limit - count)))
    res.setHeader('X-RateLimit-Reset', String(Math.ceil((Date.now() + msLeft) / 1000)))
    if (count > bucket.limit) {
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(msLeft / 1000))))
      throw new ApiError(429, 'rate_limited', 'rate limit reached: too many requests in this period')
    }
    return 'counted'
  }
}

/**
 * Per-workspace limit of a route's bucket, applied once the API key is known. The bucket is the
 * one its path belongs to: the route's pattern, never the raw path, so `/USERS/TRACK/` counts with
 * `/users/track`. The counting call also proves the cached key and workspace current; when an
 * operator changed something since they were read, both are read again and the request decided
 * again (it may now be a 401 or 429).
 */
export function rateLimitApi(opts: {
  limits: RateLimits
  workspaces: WorkspaceCache
  authenticator: ApiKeyAuthenticator
  onLimited?: (bucket: string) => void
}) {
  return (path: string) => async (req: Request, res: Response, next: NextFunction) => {
    for (let attempt = 1; ; attempt++) {
      const auth = res.locals.auth!
      const ws = await opts.workspaces.lookup(auth.workspaceId)
      if (ws.generation === auth.generation) {
        const bucket = bucketFor(path, ws.value.workspace?.rate_limits ?? {})
        try {
          if ((await opts.limits.consume(res, bucket, auth.workspaceId, auth.generation)) === 'counted') return next()
        } catch (e) {
          if ((e as ApiError).status === 429) opts.onLimited?.(bucket.name)
          throw e
        }
      }
      if (attempt === MAX_REREADS) throw unsettled()
      const again = await opts.authenticator.authenticate(bearerToken(req)!)
      if (!again) throw invalidApiKey()
      res.locals.auth = again
    }
  }
}

/** SCIM users are company-wide, and so is their rate limit. */
export function rateLimitScim(limits: RateLimits, onLimited?: (bucket: string) => void) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    try {
      await limits.consume(res, ScimBucket, 'company')
    } catch (e) {
      if ((e as ApiError).status === 429) onLimited?.(ScimBucket.name)
      throw e
    }
    next()
  }
}
