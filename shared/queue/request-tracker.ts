import type { Redis } from 'ioredis'
import { redisScript } from '../redis-script.js'
import { openJobsField, trackLayoutKey } from './track-layout.js'

export type RequestStatus = 'queued' | 'processing' | 'done' | 'failed'

/** The end of one job of a request (jobKey: the BullMQ job id). */
export interface JobReport {
  requestId: string
  jobKey: string
  status: 'done' | 'failed'
  errors?: unknown[]
}

export interface RequestProgress {
  request_id: string
  status: RequestStatus
  errors?: unknown[]
}

/** A request whose last job a `reportJobs` call reported: `report` is that job's position in the call. */
export interface FinishedRequest {
  report: number
  status: 'done' | 'failed'
}

/** Objects a job adds to the track backlog until it is reported (0: it does not count). */
export interface JobShare {
  jobKey: string
  objects: number
}

/** Bounds on accepted-but-unapplied track objects; undefined: unbounded. */
export interface BacklogBound {
  all?: number
  workspace?: number
}

/** Why `create` refused a request: the backlog it would have overfilled. */
export interface BacklogRefusal {
  scope: 'workspace' | 'all'
  objects: number
  limit: number
}

/** `create` refused a request routed for a track layout that has changed since: route it again. */
export const LAYOUT_CHANGED = 'layout'

export interface BacklogState {
  all: number
  byWorkspace: Map<string, number>
}

const TTL_SECONDS = 24 * 3600

/**
 * KEYS: request hash, its error list, the backlog hash, the track layout. ARGV: workspace, total
 * jobs, ttl, bound on all (-1: none), bound on the workspace (-1: none), enforce (1/0), the layout
 * generation the track jobs were routed for (-1: none), share count n, n pairs (jobKey, objects),
 * then the request's errors. Checks and takes the backlog share and records the request in one
 * step, so two concurrent requests can never both squeeze under the bound, and a request routed
 * for a layout changed meanwhile is refused whole (`layout`): it is routed again. The layout also
 * counts each generation's unreported track jobs (`open:g<n>`), so a change knows when the old
 * generation is done.
 */
const CREATE = `
local n = tonumber(ARGV[8])
local gen = tonumber(ARGV[7])
if gen >= 0 and tonumber(redis.call('HGET', KEYS[4], 'generation') or '0') ~= gen then return {'layout', 0, 0} end
local sum = 0
for i = 0, n - 1 do sum = sum + tonumber(ARGV[10 + 2 * i]) end
local wsField = 'ws:' .. ARGV[1]
if sum > 0 then
  if ARGV[6] == '1' then
    local maxWs = tonumber(ARGV[5])
    local ws = tonumber(redis.call('HGET', KEYS[3], wsField) or '0')
    if maxWs >= 0 and ws + sum > maxWs then return {'workspace', ws, maxWs} end
    local maxAll = tonumber(ARGV[4])
    local all = tonumber(redis.call('HGET', KEYS[3], 'all') or '0')
    if maxAll >= 0 and all + sum > maxAll then return {'all', all, maxAll} end
  end
  redis.call('HINCRBY', KEYS[3], 'all', sum)
  redis.call('HINCRBY', KEYS[3], wsField, sum)
end
local fields = {'workspace', ARGV[1], 'total', ARGV[2], 'started', 0}
local shares = 0
for i = 0, n - 1 do
  if tonumber(ARGV[10 + 2 * i]) > 0 then
    fields[#fields + 1] = 'w:' .. ARGV[9 + 2 * i]
    fields[#fields + 1] = ARGV[10 + 2 * i]
    shares = shares + 1
  end
end
if gen >= 0 and shares > 0 then
  fields[#fields + 1] = 'gen'
  fields[#fields + 1] = gen
  redis.call('HINCRBY', KEYS[4], 'open:g' .. gen, shares)
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('EXPIRE', KEYS[1], ARGV[3])
if #ARGV > 8 + 2 * n then
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 9 + 2 * n))
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return 0`

/**
 * Gives a backlog share back (and the job's count in its layout generation); a field at or below
 * zero is dropped, so idle workspaces leave no trace.
 */
const GIVE_BACK = `
local function giveBack(backlog, field, objects)
  if redis.call('HINCRBY', backlog, field, -objects) <= 0 then redis.call('HDEL', backlog, field) end
end
local function releaseJob(backlog, layout, k, job)
  local w = redis.call('HGET', k, 'w:' .. job)
  if w then
    redis.call('HDEL', k, 'w:' .. job)
    giveBack(backlog, 'all', tonumber(w))
    giveBack(backlog, 'ws:' .. redis.call('HGET', k, 'workspace'), tonumber(w))
    local gen = redis.call('HGET', k, 'gen')
    if gen then giveBack(layout, 'open:g' .. gen, 1) end
  end
end
`

/**
 * KEYS: the backlog hash. ARGV: request key prefix, ttl, then per report: requestId, jobKey,
 * status, error count e, e errors. A job's errors and its backlog share are handled only when the
 * job is first reported (in neither the done nor the failed set yet): a replay changes nothing.
 * Returns, per first report that finished its request (every job reported), the report's position
 * (0-based) and 1 when some job of the request failed.
 */
const REPORT = `${GIVE_BACK}
local finished = {}
local n = 0
local i = 3
while i <= #ARGV do
  local k = ARGV[1] .. ARGV[i]
  local job, status, e = ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local new = redis.call('SISMEMBER', k .. ':done', job) == 0 and redis.call('SISMEMBER', k .. ':failed', job) == 0
  redis.call('SADD', k .. ':' .. status, job)
  redis.call('EXPIRE', k .. ':' .. status, ARGV[2])
  if new then
    if e > 0 then
      redis.call('RPUSH', k .. ':errors', unpack(ARGV, i + 4, i + 3 + e))
      redis.call('EXPIRE', k .. ':errors', ARGV[2])
    end
    releaseJob(KEYS[1], KEYS[2], k, job)
    local total = tonumber(redis.call('HGET', k, 'total') or '0')
    local failed = redis.call('SCARD', k .. ':failed')
    if total > 0 and redis.call('SCARD', k .. ':done') + failed >= total then
      finished[#finished + 1] = n
      finished[#finished + 1] = math.min(failed, 1)
    end
  end
  n = n + 1
  i = i + 4 + e
end
return finished`

/** KEYS: request hash, backlog hash, track layout. Gives back the shares of the request's jobs not reported yet. */
const RELEASE = `${GIVE_BACK}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 2) == 'w:' then releaseJob(KEYS[2], KEYS[3], KEYS[1], string.sub(f, 3)) end
end
return 0`

const createScript = redisScript(CREATE)
const reportScript = redisScript(REPORT)
const releaseScript = redisScript(RELEASE)

/**
 * Progress of queued work, kept in Redis beside the queues for 24 hours. Completion is a set of
 * job keys, so a job reported twice (a retry after a crash) is counted once. It also keeps the
 * track backlog: objects of accepted jobs not reported yet, in all and per workspace.
 */
export class RequestTracker {
  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  private key(id: string) {
    return `${this.prefix}:request:${id}`
  }

  private get backlogKey() {
    return `${this.prefix}:backlog`
  }

  /**
   * Records an accepted request. With `shares`, its jobs' objects join the backlog, and with
   * `bound` the request is refused (nothing recorded) when they would not fit.
   */
  async create(req: {
    requestId: string
    workspaceId: string
    totalJobs: number
    errors?: unknown[]
    shares?: JobShare[]
    bound?: BacklogBound
    /** The track layout generation the request's track jobs were routed for: a changed layout refuses it (`'layout'`). */
    generation?: number
  }): Promise<BacklogRefusal | typeof LAYOUT_CHANGED | undefined> {
    const k = this.key(req.requestId)
    const shares = req.shares ?? []
    const bound = req.bound
    const r = await createScript(this.redis, [k, `${k}:errors`, this.backlogKey, trackLayoutKey(this.prefix)], [
      req.workspaceId,
      req.totalJobs,
      TTL_SECONDS,
      bound?.all ?? -1,
      bound?.workspace ?? -1,
      bound ? 1 : 0,
      req.generation ?? -1,
      shares.length,
      ...shares.flatMap((s) => [s.jobKey, s.objects]),
      ...(req.errors ?? []).map((e) => JSON.stringify(e)),
    ])
    if (!Array.isArray(r)) return undefined
    if (r[0] === LAYOUT_CHANGED) return LAYOUT_CHANGED
    return { scope: r[0] as BacklogRefusal['scope'], objects: Number(r[1]), limit: Number(r[2]) }
  }

  /** Track jobs of a layout generation accepted and not reported yet. */
  async openJobs(generation: number): Promise<number> {
    return Number((await this.redis.hget(trackLayoutKey(this.prefix), openJobsField(generation))) ?? 0)
  }

  /** Gives back the backlog shares of a request whose jobs could not all be enqueued. */
  async release(requestId: string): Promise<void> {
    await releaseScript(this.redis, [this.key(requestId), this.backlogKey, trackLayoutKey(this.prefix)], [])
  }

  async markStarted(requestId: string): Promise<void> {
    await this.markStartedMany([requestId])
  }

  /** One round trip for a whole batch. */
  async markStartedMany(requestIds: string[]): Promise<void> {
    if (requestIds.length === 0) return
    const m = this.redis.pipeline()
    for (const id of requestIds) m.hset(this.key(id), 'started', 1)
    await m.exec()
  }

  /**
   * Records the end of jobs, one round trip (one script) for a whole batch. Idempotent per job: a
   * job reported twice (a replay after a crash) records its errors once, counts once and gives its
   * backlog share back once. Returns the requests these reports finished (each once, also under replays).
   */
  async reportJobs(reports: JobReport[]): Promise<FinishedRequest[]> {
    if (reports.length === 0) return []
    const args: (string | number)[] = [`${this.prefix}:request:`, TTL_SECONDS]
    for (const r of reports) {
      const errors = (r.errors ?? []).map((e) => JSON.stringify(e))
      args.push(r.requestId, r.jobKey, r.status, errors.length, ...errors)
    }
    const flat = (await reportScript(this.redis, [this.backlogKey, trackLayoutKey(this.prefix)], args)) as number[]
    const finished: FinishedRequest[] = []
    for (let i = 0; i < flat.length; i += 2) finished.push({ report: flat[i], status: flat[i + 1] ? 'failed' : 'done' })
    return finished
  }

  /** `errors` are non-fatal (an object skipped); a job reported twice records them once. */
  async markJobDone(requestId: string, jobKey: string, errors: unknown[] = []): Promise<void> {
    await this.reportJobs([{ requestId, jobKey, status: 'done', errors }])
  }

  async markJobFailed(requestId: string, jobKey: string, errors: unknown[]): Promise<void> {
    await this.reportJobs([{ requestId, jobKey, status: 'failed', errors }])
  }

  /** Objects of accepted track jobs not applied yet, in all and per workspace (only those holding some). */
  async backlog(): Promise<BacklogState> {
    const h = await this.redis.hgetall(this.backlogKey)
    const byWorkspace = new Map<string, number>()
    for (const [f, v] of Object.entries(h)) if (f.startsWith('ws:')) byWorkspace.set(f.slice(3), Number(v))
    return { all: Number(h.all ?? 0), byWorkspace }
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

  /**
   * Polls the request until it is done or failed; undefined once `timeoutMs` passed first. For the
   * endpoints that answer after their queued work applied (/users/track/sync, external id renames).
   */
  async waitUntilFinished(requestId: string, workspaceId: string, timeoutMs: number, pollMs = 10): Promise<RequestProgress | undefined> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const progress = await this.get(requestId, workspaceId)
      if (progress && (progress.status === 'done' || progress.status === 'failed')) return progress
      if (Date.now() >= deadline) return undefined
      await new Promise((r) => setTimeout(r, Math.min(pollMs, Math.max(1, deadline - Date.now()))))
    }
  }
}
