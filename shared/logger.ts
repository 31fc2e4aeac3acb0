import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isMainThread } from 'node:worker_threads'
import { pino, type DestinationStream, type Level, type Logger } from 'pino'

export type { Logger }

/**
 * Standard output, written a few KiB at a time and at least every second: at a line per request
 * and per job, a write of its own for each line was a thread-pool round trip per request. Pino
 * writes what is left when the process exits; a process killed with SIGKILL loses at most its
 * last second of lines. No write exceeds PIPE_BUF, so it reaches a pipe whole, never interleaved
 * with another writer's (a worker thread's logger, which writes each line as it comes: pino does
 * not see a thread's exit).
 */
const standardOutput = (): DestinationStream | undefined =>
  isMainThread ? pino.destination({ dest: 1, sync: false, minLength: 3072, maxWrite: 4096, periodicFlush: 1000 }) : undefined

/**
 * Secrets never reach a log line: headers and fields that carry them are redacted. The HTTP
 * serializers below already log no headers at all; these paths also guard ad-hoc log calls.
 */
export function createLogger(level: string, destination: DestinationStream | undefined = standardOutput()): Logger {
  const options = {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'headers.authorization',
        'headers.cookie',
        'authorization',
        'cookie',
        'key',
        'api_key',
        'token',
        'signature',
        '*.secret_access_key',
        'secret_access_key',
      ],
      censor: '[redacted]',
    },
  }
  return destination ? pino(options, destination) : pino(options)
}

/** Probes, scrapes and the dashboard's polling would drown the request log; they log at debug. */
const QUIET_PATHS = [/^\/healthz$/, /^\/readyz$/, /^\/metrics$/, /^\/admin\/queues(\/|$)/, /^\/docs(\/|$)/]

interface ExpressRequestFields {
  originalUrl?: string
}

/**
 * Only the path, as the client sent it and the router matched it, and the names of query
 * parameters: values may be secrets (the dashboard's `?token=`, a download link's `?signature=`)
 * or personal data (an email in a status query).
 */
function targetOf(req: IncomingMessage & ExpressRequestFields): { path: string; query?: string[] } {
  const raw = req.originalUrl ?? req.url ?? '/'
  const q = raw.indexOf('?')
  if (q < 0) return { path: raw }
  const names = [...new Set(new URLSearchParams(raw.slice(q + 1)).keys())]
  return { path: raw.slice(0, q), ...(names.length && { query: names }) }
}

interface ResponseLocals {
  locals?: { requestId?: string }
}

/**
 * The request id of a queued write is the one the route hands out as X-Request-Id (and that its
 * jobs log), so the API line and the job lines of one request share it; other requests get a
 * generated one that is only in the log.
 */
function requestIdOf(res: ServerResponse & ResponseLocals): string {
  return res.locals?.requestId ?? randomUUID()
}

/**
 * One JSON line per finished request: no headers, no bodies, no query values. A plain middleware
 * rather than pino-http, which built a child logger for every request even when its line was not
 * written (a tenth of the API's time at 500 small requests a second).
 */
export function httpLogger(logger: Logger) {
  return (req: IncomingMessage & ExpressRequestFields, res: ServerResponse & ResponseLocals, next: () => void) => {
    const started = performance.now()
    res.once('finish', () => {
      const { path, query } = targetOf(req)
      const level: Level = res.statusCode >= 500 ? 'error' : QUIET_PATHS.some((p) => p.test(path)) ? 'debug' : 'info'
      if (!logger.isLevelEnabled(level)) return
      const line = {
        req: { method: req.method, path, ...(query && { query }), remoteAddress: req.socket?.remoteAddress, userAgent: req.headers['user-agent'] },
        res: { statusCode: res.statusCode },
        responseTime: Math.round(performance.now() - started),
        requestId: requestIdOf(res),
      }
      logger[level](line, `${req.method} ${path} ${res.statusCode}`)
    })
    next()
  }
}
