/** An error meant for the API user: a stable code, an HTTP status and a readable message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

export const badRequest = (message: string, extra: Record<string, unknown> = {}) =>
  new ApiError(400, 'bad_request', message, extra)
export const notFound = (message: string) => new ApiError(404, 'not_found', message)
export const conflict = (message: string) => new ApiError(409, 'conflict', message)

/** A dependency this answer needs is away for now: 503 with `Retry-After`, never a guess. */
export class UnavailableError extends ApiError {
  constructor(message: string, readonly retryAfterSeconds = 5) {
    super(503, 'unavailable', message)
  }
}

/** A failure a retry can fix (a lost connection); processors let it propagate. */
export class RetryableError extends Error {
  constructor(message: string, readonly cause?: unknown) {
    super(message)
  }
}

const retryableCodes = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', '08000', '08003', '08006', '08001', '08004', '40001', '40P01', '53300',
])

export function isRetryable(e: unknown): boolean {
  if (e instanceof RetryableError) return true
  const err = e as { code?: string; message?: string } | null
  if (!err) return false
  if (err.code && retryableCodes.has(err.code)) return true
  return /Connection terminated|connection ended|Client has encountered a connection error|socket hang up|Connection is closed/i.test(
    err.message ?? '',
  )
}
