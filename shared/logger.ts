import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { pino, type DestinationStream, type Logger } from 'pino'
import { pinoHttp, type HttpLogger } from 'pino-http'

export type { Logger }

/**
 * Secrets never reach a log line: headers and fields that carry them are redacted. The HTTP
 * serializers below already log no headers at all; these paths also guard ad-hoc log calls.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
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
 * Only the path and the names of query parameters: values may be secrets (the dashboard's
 * `?token=`, a download link's `?signature=`) or personal data (an email in a status query).
 */
function urlOf(req: IncomingMessage & ExpressRequestFields): URL {
  return new URL(req.originalUrl ?? req.url ?? '/', 'http://local')
}

function requestLine(req: IncomingMessage & ExpressRequestFields) {
  const url = urlOf(req)
  const query = [...new Set(url.searchParams.keys())]
  return {
    method: req.method,
    path: url.pathname,
    ...(query.length && { query }),
    remoteAddress: req.socket?.remoteAddress,
    userAgent: req.headers['user-agent'],
  }
}

function quietPath(req: IncomingMessage & ExpressRequestFields): boolean {
  const path = urlOf(req).pathname
  return QUIET_PATHS.some((p) => p.test(path))
}

function summary(req: IncomingMessage & ExpressRequestFields, res: ServerResponse): string {
  return `${req.method} ${urlOf(req).pathname} ${res.statusCode}`
}

interface ResponseLocals {
  locals?: { requestId?: string }
}

/**
 * The request id of a queued write is the one the route hands out as X-Request-Id (and that its
 * jobs log), so the API line and the job lines of one request share it; other requests get a
 * generated one that is only in the log.
 */
function requestIdOf(req: IncomingMessage & { id?: unknown }, res: ServerResponse & ResponseLocals): string {
  return res.locals?.requestId ?? String(req.id)
}

/** One JSON line per finished request: no headers, no bodies, no query values. */
export function httpLogger(logger: Logger): HttpLogger {
  return pinoHttp({
    logger,
    genReqId: () => randomUUID(),
    wrapSerializers: false,
    serializers: {
      req: requestLine,
      res: (res: ServerResponse) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (req, res, err) => {
      if (err || res.statusCode >= 500) return 'error'
      return quietPath(req) ? 'debug' : 'info'
    },
    customSuccessObject: (req, res, value) => ({ ...value, requestId: requestIdOf(req, res) }),
    customErrorObject: (req, res, _err, value) => ({ ...value, requestId: requestIdOf(req, res) }),
    customSuccessMessage: summary,
    customErrorMessage: summary,
  })
}
