import { createHash } from 'node:crypto'
import type { NextFunction, Request, Response } from 'express'
import type { Redis } from 'ioredis'
import { ApiError } from '../../../shared/errors.js'

const TTL_SECONDS = 24 * 3600
const PENDING = 'pending'

interface StoredResponse {
  status: number
  body: unknown
  requestId?: string
}

/**
 * `Idempotency-Key` on a write: the first request claims the key in Redis (SET NX) and its
 * response is stored for 24 hours; a repeat gets that response again and changes nothing. A
 * repeat while the first is still running gets 409. A 5xx or 429 frees the key so the client can retry.
 */
export function idempotency(redis: Redis, prefix: string) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const key = req.header('Idempotency-Key')
    if (key === undefined) return next()
    if (key.length === 0 || key.length > 255) {
      throw new ApiError(400, 'bad_request', 'Idempotency-Key must be 1 to 255 characters')
    }
    const workspaceId = res.locals.auth!.workspaceId
    const redisKey = `${prefix}:idem:${workspaceId}:${createHash('sha256').update(key).digest('hex')}`
    let claimed: string | null
    try {
      claimed = await redis.set(redisKey, PENDING, 'EX', TTL_SECONDS, 'NX')
    } catch {
      throw new ApiError(503, 'unavailable', 'the service cannot accept requests right now (Redis unavailable)')
    }
    if (!claimed) {
      const stored = await redis.get(redisKey)
      if (!stored || stored === PENDING) {
        throw new ApiError(409, 'idempotency_conflict', 'a request with this Idempotency-Key is still being processed')
      }
      const first = JSON.parse(stored) as StoredResponse
      if (first.requestId) res.setHeader('X-Request-Id', first.requestId)
      res.setHeader('Idempotent-Replayed', 'true')
      return res.status(first.status).json(first.body)
    }
    const json = res.json.bind(res)
    res.json = (body: unknown) => {
      const stored: StoredResponse = { status: res.statusCode, body, requestId: res.getHeader('X-Request-Id') as string }
      // A 429 (backlog full) accepted nothing either: the client's retry must be able to get through.
      const save =
        res.statusCode >= 500 || res.statusCode === 429 ? redis.del(redisKey) : redis.set(redisKey, JSON.stringify(stored), 'EX', TTL_SECONDS)
      save.catch(() => {})
      return json(body)
    }
    next()
  }
}
