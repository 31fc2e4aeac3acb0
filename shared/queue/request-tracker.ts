import type { Redis } from 'ioredis'

export type RequestStatus = 'queued' | 'processing' | 'done' | 'failed'

export interface RequestProgress {
  request_id: string
  status: RequestStatus
  errors?: unknown[]
}

const TTL_SECONDS = 24 * 3600

/**
 * Progress of queued work, kept in Redis beside the queues for 24 hours. Completion is a set of
 * job keys, so a job reported twice (a retry after a crash) is counted once.
 */
export class RequestTracker {
  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  private key(id: string) {
    return `${this.prefix}:request:${id}`
  }

  async create(requestId: string, workspaceId: string, totalJobs: number, errors: unknown[] = []): Promise<void> {
    const k = this.key(requestId)
    const m = this.redis.multi().hset(k, { workspace: workspaceId, total: totalJobs, started: 0 }).expire(k, TTL_SECONDS)
    if (errors.length) m.rpush(`${k}:errors`, ...errors.map((e) => JSON.stringify(e))).expire(`${k}:errors`, TTL_SECONDS)
    await m.exec()
  }

  async markStarted(requestId: string): Promise<void> {
    await this.redis.hset(this.key(requestId), 'started', 1)
  }

  /** `errors` are non-fatal (an object skipped); a job reported twice records them once. */
  async markJobDone(requestId: string, jobKey: string, errors: unknown[] = []): Promise<void> {
    const k = this.key(requestId)
    if (errors.length) {
      const first = await this.redis.sadd(`${k}:reported`, jobKey)
      if (first) await this.redis.multi().expire(`${k}:reported`, TTL_SECONDS).rpush(`${k}:errors`, ...errors.map((e) => JSON.stringify(e))).expire(`${k}:errors`, TTL_SECONDS).exec()
    }
    await this.redis.multi().sadd(`${k}:done`, jobKey).expire(`${k}:done`, TTL_SECONDS).exec()
  }

  async markJobFailed(requestId: string, jobKey: string, errors: unknown[]): Promise<void> {
    const k = this.key(requestId)
    const m = this.redis.multi().sadd(`${k}:failed`, jobKey).expire(`${k}:failed`, TTL_SECONDS)
    if (errors.length) m.rpush(`${k}:errors`, ...errors.map((e) => JSON.stringify(e))).expire(`${k}:errors`, TTL_SECONDS)
    await m.exec()
  }

  /** Undefined when unknown or owned by another workspace (both answer 404). */
  async get(requestId: string, workspaceId: string): Promise<RequestProgress | undefined> {
    const k = this.key(requestId)
    const [[, meta], [, done], [, failed], [, errors]] = (await this.redis
      .multi()
      .hgetall(k)
      .scard(`${k}:done`)
      .scard(`${k}:failed`)
      .lrange(`${k}:errors`, 0, 999)
      .exec()) as [unknown, unknown][]
    const m = meta as Record<string, string>
    if (!m || m.workspace !== workspaceId) return undefined
    const total = Number(m.total)
    const finished = (done as number) + (failed as number)
    const status: RequestStatus =
      finished >= total ? ((failed as number) > 0 ? 'failed' : 'done') : m.started === '1' || finished > 0 ? 'processing' : 'queued'
    const errs = (errors as string[]).map((e) => JSON.parse(e))
    return { request_id: requestId, status, ...(errs.length ? { errors: errs } : {}) }
  }
}
