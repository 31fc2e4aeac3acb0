import type { NextFunction, Request, Response } from 'express'
import { ScimBasePath, ScimContentType, scimErrorBody } from '../../../shared/domain/scim.js'
import { ApiError, isRetryable, UnavailableError } from '../../../shared/errors.js'
import type { Logger } from '../../../shared/logger.js'
import { QueueUnavailableError } from '../../../shared/queue/jobs.js'

/** Postgres refusing a text value (a NUL character): the client's input, never a server fault. */
const UNSTORABLE_TEXT = new Set(['22021', '22P05'])

/**
 * Every failure answers JSON with a `message`; body-parser errors become the 4xx they are. Under
 * /scim/v2 the answer is a SCIM error body (RFC 7644 section 3.12) instead, with the `scimType` a
 * SCIM error carries (scimError), or `invalidSyntax` for a 400 that fails before the SCIM router.
 */
export function errorHandler(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) return
    const scim = req.path === ScimBasePath || req.path.startsWith(`${ScimBasePath}/`)
    const reply = (status: number, message: string, extra: Record<string, unknown> = {}) => {
      // Every 503 is a passing state (Redis or a database connection away, settings changing): say when to retry.
      if (status === 503 && !res.hasHeader('Retry-After')) res.setHeader('Retry-After', '1')
      return scim
        ? res.status(status).type(ScimContentType).json(scimErrorBody(status, message, (extra.scimType as string | undefined) ?? (status === 400 ? 'invalidSyntax' : undefined)))
        : res.status(status).json({ message, ...extra })
    }
    if (err instanceof UnavailableError) res.setHeader('Retry-After', String(err.retryAfterSeconds))
    if (err instanceof ApiError) return reply(err.status, err.message, err.extra)
    const e = err as { type?: string; status?: number; message?: string; limit?: number; code?: string }
    if (e?.type === 'entity.parse.failed') return reply(400, `malformed JSON body: ${e.message}`)
    if (e?.type === 'entity.too.large') return reply(413, `request body is larger than the limit of ${e.limit} bytes`)
    if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return reply(415, e.message ?? 'unsupported encoding')
    if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) return reply(e.status, e.message ?? 'bad request')
    // Postgres's own wording stays in the log.
    if (typeof e?.code === 'string' && UNSTORABLE_TEXT.has(e.code)) return reply(400, 'the request holds text that cannot be stored (a NUL character or bytes that are not UTF-8)')
    // Redis away: nothing was accepted. Checked before the generic retryable answer, whose message names the database.
    if (err instanceof QueueUnavailableError) return reply(503, `the service cannot accept work right now (${err.message})`)
    if (isRetryable(err)) {
      // A lost Postgres connection (the pool replaces it): nothing was accepted, the client retries.
      logger.warn({ err, path: req.path }, 'retryable failure')
      return reply(503, 'the service is temporarily unavailable (database connection lost); retry the request')
    }
    logger.error({ err, path: req.path }, 'unhandled error')
    reply(500, 'internal server error')
  }
}

export function notFoundHandler(req: Request, res: Response) {
  res.status(404).json({ message: `no such endpoint: ${req.method} ${req.path}` })
}

/** Bodies must be JSON: a write with another content type is refused with 415. */
export function requireJson(req: Request, _res: Response, next: NextFunction) {
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined
  // The common header needs no media-type parse (req.is parses the header on every request).
  const type = req.headers['content-type']
  const plainJson = type === 'application/json' || type?.startsWith('application/json;') === true
  if (hasBody && !plainJson && !req.is(['application/json', 'application/scim+json'])) {
    return next(new ApiError(415, 'unsupported_media_type', 'Content-Type must be application/json'))
  }
  next()
}
