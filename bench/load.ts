// Load against the running service, through its HTTP interface only: a closed loop that honours
// 429 + Retry-After, an open loop at a fixed rate, and completion read from GET /requests/{id}.
import { HttpClient, type Reply } from './http-client.js'
import { percentile, pool, sleep } from './lib.js'

export interface Target {
  /** API base URLs; requests go round-robin over them. */
  urls: string[]
  key: string
}

export interface Answer {
  /** HTTP status, or 0 when no answer came (the reason says why). */
  status: number
  requestId?: string
  retryAfterSeconds?: number
  reason?: string
}

const REQUEST_TIMEOUT_MS = 30_000

// fetch cannot send 1,000 small requests a second on this 2-core machine, even to a server that
// answers at once; node:http keeps up but takes ~0.3 ms of CPU a request from the service it
// measures; bench/http-client.ts takes less. No socket limit: open loop means every request leaves
// at its instant, whatever the earlier ones are doing. An idle socket is closed after 30 s, before
// the server's keep-alive timeout (65 s) closes it: a socket reused just as the server closes it
// is reset.
const client = new HttpClient({ timeoutMs: REQUEST_TIMEOUT_MS, idleMs: 30_000 })

/** One HTTP exchange; a network error or the timeout rejects with the reason. */
export function request(url: string, key: string, { method, path, body }: { method: string; path: string; body?: string }): Promise<Reply> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}` }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  return client.request(url, { method, path, headers, body })
}

export async function post(url: string, key: string, path: string, body: string): Promise<Answer> {
  try {
    const r = await request(url, key, { method: 'POST', path, body })
    const retryAfter = r.headers['retry-after']
    return {
      status: r.status,
      requestId: r.headers['x-request-id'] as string | undefined,
      retryAfterSeconds: retryAfter === undefined ? undefined : Number(retryAfter) || 1,
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException
    return { status: 0, reason: err.code ?? err.message }
  }
}

const ok = (status: number) => status >= 200 && status < 300

export interface ClosedLoopResult {
  /** X-Request-Id of each request, by index. */
  ids: string[]
  /** Latency of every answer (429s included), ms, sorted. */
  latencies: number[]
  /** Answers 429 that were waited out (Retry-After) and sent again. */
  retried429: number
  startedAt: number
  acceptedAt: number
}

/**
 * `count` requests with `concurrency` in flight. A 429 is waited out for its Retry-After and sent
 * again, as a well-behaved client does; any other refusal stops the benchmark. With `stopAt429`
 * the loop instead stops sending at the first 429 (the backlog is full) and returns what was accepted.
 */
export async function closedLoop(opts: {
  count: number
  concurrency: number
  send: (i: number) => Promise<Answer>
  stopAt429?: boolean
}): Promise<ClosedLoopResult & { stoppedAt429: boolean }> {
  const ids: string[] = []
  const latencies: number[] = []
  let retried429 = 0
  let next = 0
  let stoppedAt429 = false
  const startedAt = performance.now()
  await Promise.all(
    Array.from({ length: Math.min(opts.concurrency, opts.count) }, async () => {
      while (next < opts.count && !stoppedAt429) {
        const i = next++
        for (;;) {
          const t0 = performance.now()
          const a = await opts.send(i)
          latencies.push(performance.now() - t0)
          if (ok(a.status)) {
            ids[i] = a.requestId!
            break
          }
          if (a.status !== 429) throw new Error(`request ${i} answered ${a.status || a.reason}`)
          if (opts.stopAt429) {
            stoppedAt429 = true
            break
          }
          retried429++
          await sleep((a.retryAfterSeconds ?? 1) * 1000)
        }
      }
    }),
  )
  latencies.sort((a, b) => a - b)
  return { ids: ids.filter(Boolean), latencies, retried429, startedAt, acceptedAt: performance.now(), stoppedAt429 }
}

export interface OpenLoopSample {
  /** Scheduled send instant (performance.now() clock). */
  due: number
  /** From the scheduled instant to the answer, ms. */
  latency: number
  status: number
  reason?: string
  requestId?: string
}

export interface LatencySummary {
  count: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  /** Requests not accepted (any answer but 2xx, or none), by HTTP status or network error. */
  failures: number
  failureReasons: Record<string, number>
  /** Failures other than 429: a request the client saw cut off (5xx, reset, timeout). */
  cutOff: number
}

export function summarize(samples: OpenLoopSample[]): LatencySummary {
  const latencies = samples.map((s) => s.latency).sort((a, b) => a - b)
  const failureReasons: Record<string, number> = {}
  for (const s of samples) {
    if (ok(s.status)) continue
    const reason = s.status ? String(s.status) : (s.reason ?? 'error')
    failureReasons[reason] = (failureReasons[reason] ?? 0) + 1
  }
  const failures = Object.values(failureReasons).reduce((a, b) => a + b, 0)
  return {
    count: samples.length,
    p50Ms: round(percentile(latencies, 50)),
    p90Ms: round(percentile(latencies, 90)),
    p99Ms: round(percentile(latencies, 99)),
    maxMs: round(latencies[latencies.length - 1] ?? 0),
    failures,
    failureReasons,
    cutOff: failures - (failureReasons['429'] ?? 0),
  }
}

export interface OpenLoopResult {
  rps: number
  seconds: number
  warmUpSeconds: number
  /** Recorded requests (the warm-up excluded), in send order. */
  samples: OpenLoopSample[]
  /** How late the load generator itself called fetch, p99 ms: large values mean this process was starved. */
  sendLagP99Ms: number
  /** Actual instant of the last send. */
  lastSendAt: number
}

/**
 * Requests at a fixed rate, open loop: request i leaves at start + i/rps whatever earlier ones are
 * doing, and its latency counts from that scheduled instant, so a stalled service cannot slow the
 * sender and hide its own delay. The first `warmUpSeconds` run at the same rate and are not recorded.
 * `onAnswer` sees every recorded answer as it arrives.
 */
export async function openLoop(opts: {
  rps: number
  seconds: number
  warmUpSeconds: number
  send: (i: number) => Promise<Answer>
  onAnswer?: (s: OpenLoopSample) => void
}): Promise<OpenLoopResult> {
  const warm = Math.round(opts.rps * opts.warmUpSeconds)
  const total = warm + Math.round(opts.rps * opts.seconds)
  const samples: OpenLoopSample[] = []
  const lags: number[] = []
  const inflight: Promise<void>[] = []
  const start = performance.now() + 5
  let lastSendAt = start
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / opts.rps
    const wait = due - performance.now()
    // Never early (a timer fires at the earliest after its delay); when behind, still let answers in.
    if (wait > 0) await sleep(wait)
    else if (i % 16 === 0) await new Promise((r) => setImmediate(r))
    lastSendAt = performance.now()
    const recorded = i >= warm
    if (recorded) lags.push(lastSendAt - due)
    inflight.push(
      opts.send(i).then((a) => {
        if (!recorded) return
        const s: OpenLoopSample = { due, latency: performance.now() - due, status: a.status, reason: a.reason, requestId: a.requestId }
        samples.push(s)
        opts.onAnswer?.(s)
      }),
    )
  }
  await Promise.all(inflight)
  samples.sort((a, b) => a.due - b.due)
  lags.sort((a, b) => a - b)
  return { rps: opts.rps, seconds: opts.seconds, warmUpSeconds: opts.warmUpSeconds, samples, sendLagP99Ms: round(percentile(lags, 99)), lastSendAt }
}

interface Progress {
  status: 'queued' | 'processing' | 'done' | 'failed'
  errors?: unknown[]
}

export async function progress(url: string, key: string, id: string): Promise<Progress> {
  const r = await request(url, key, { method: 'GET', path: `/requests/${id}` })
  if (r.status !== 200) throw new Error(`GET /requests/${id} answered ${r.status}`)
  return JSON.parse(r.body) as Progress
}

export interface Completion {
  /** Instant (performance.now() clock) by which every request had been seen finished; undefined past the deadline. */
  doneAt?: number
  /** Requests still unfinished at the deadline. */
  pending: number
  failed: number
  /** Requests whose progress lists errors (objects or operations skipped while applying). */
  withErrors: number
  /** Resolution of doneAt, ms: the wait between two looks at a still-unfinished request. */
  pollMs: number
}

/**
 * Waits until every request is finished (`done` or `failed`). Requests finish in about the order
 * they were accepted, so the newest 32 are watched first (their finish is the end), an unfinished
 * one looked at every `pollMs`; the rest are then read once each, and any still unfinished are
 * watched too.
 */
export async function allFinished(t: Target, ids: string[], opts: { pollMs: number; deadline?: number }): Promise<Completion> {
  const result: Completion = { pending: 0, failed: 0, withErrors: 0, pollMs: opts.pollMs }
  let i = 0
  const look = async (id: string): Promise<boolean> => {
    const p = await progress(t.urls[i++ % t.urls.length], t.key, id)
    if (p.status !== 'done' && p.status !== 'failed') return false
    if (p.status === 'failed') result.failed++
    if (p.errors?.length) result.withErrors++
    return true
  }
  // One request looked at a time, the newest first, the next at once when it is finished: looking
  // at all 32 every pollMs made ~1,500 requests a second and took the CPU the bench measures.
  const watch = async (watched: string[]): Promise<boolean> => {
    const left = [...watched].reverse()
    while (left.length) {
      if (await look(left[0])) {
        left.shift()
        continue
      }
      if (opts.deadline !== undefined && performance.now() > opts.deadline) {
        result.pending += left.length
        return false
      }
      await sleep(opts.pollMs)
    }
    return true
  }
  const newest = ids.slice(-32)
  if (!(await watch(newest))) return result
  let doneAt = performance.now()
  const older = ids.slice(0, -32)
  const finished = await pool(older.length, 32, (k) => look(older[k]))
  const stragglers = older.filter((_, k) => !finished[k])
  if (stragglers.length) {
    if (!(await watch(stragglers))) return result
    doneAt = performance.now()
  }
  return { ...result, doneAt }
}

/** Milliseconds from `since` until `/requests/{id}` first says done (or failed), looking every `pollMs`. */
export async function timeToDone({ url, key }: { url: string; key: string }, { id, since, pollMs }: { id: string; since: number; pollMs: number }): Promise<{ ms: number; status: string }> {
  for (;;) {
    const p = await progress(url, key, id)
    if (p.status === 'done' || p.status === 'failed') return { ms: performance.now() - since, status: p.status }
    await sleep(pollMs)
  }
}

export const round = (n: number) => Math.round(n * 100) / 100

/**
 * Accepted -> done at a fixed rate, open loop: from each request's scheduled send until
 * `/requests/{id}` first says done (or failed), looking every `pollMs`.
 */
export async function acceptedToDone(opts: { rps: number; seconds: number; warmUpSeconds: number; pollMs: number; send: (i: number) => Promise<Answer> }, t: Target) {
  const waits: Promise<{ ms: number; status: string; due: number }>[] = []
  let k = 0
  const run = await openLoop({
    ...opts,
    onAnswer: (s) => {
      if (s.requestId && s.status < 300) waits.push(timeToDone({ url: t.urls[k++ % t.urls.length], key: t.key }, { id: s.requestId, since: s.due, pollMs: opts.pollMs }).then((d) => ({ ...d, due: s.due })))
    },
  })
  const done = await Promise.all(waits)
  const ms = done.map((d) => d.ms).sort((a, b) => a - b)
  return {
    rps: run.rps,
    seconds: run.seconds,
    requests: done.length,
    failedApplying: done.filter((d) => d.status === 'failed').length,
    p50Ms: round(percentile(ms, 50)),
    p99Ms: round(percentile(ms, 99)),
    maxMs: round(ms[ms.length - 1] ?? 0),
    pollMs: opts.pollMs,
    api: summarize(run.samples),
    /** Each request's scheduled send (performance.now() clock) and its ms to done, in send order. */
    each: done.sort((a, b) => a.due - b.due).map((d) => ({ due: d.due, ms: d.ms })),
  }
}

/**
 * Full-size /users/track bodies sent `concurrency` in flight, then every one awaited `done`:
 * accepted (last 2xx) and applied (last `done`) from the first send, as every ingest part reports them.
 */
export async function fullLoad(t: Target, bodies: string[], opts: { concurrency: number; objects: number; deadlineMs: number }) {
  const sent = await closedLoop({ count: bodies.length, concurrency: opts.concurrency, send: (i) => post(t.urls[i % t.urls.length], t.key, '/users/track', bodies[i]) })
  const done = await allFinished(t, sent.ids, { pollMs: 20, deadline: sent.startedAt + opts.deadlineMs })
  const { objects } = opts
  const seconds = done.doneAt === undefined ? undefined : (done.doneAt - sent.startedAt) / 1000
  const figures = {
    requests: bodies.length,
    objects,
    concurrency: opts.concurrency,
    acceptSeconds: round((sent.acceptedAt - sent.startedAt) / 1000),
    acceptedPerSecond: Math.round(objects / ((sent.acceptedAt - sent.startedAt) / 1000)),
    /** First request sent to last request seen `done`. */
    seconds: seconds === undefined ? null : round(seconds),
    appliedPerSecond: seconds === undefined ? null : Math.round(objects / seconds),
    notAppliedAtDeadline: done.pending,
    failedRequests: done.failed,
    requestsWithErrors: done.withErrors,
    completionResolutionMs: done.pollMs,
    apiP50Ms: round(percentile(sent.latencies, 50)),
    apiP99Ms: round(percentile(sent.latencies, 99)),
    retried429: sent.retried429,
  }
  return { sent, done, figures }
}

/**
 * Runs `measure` while the worker drains a full-size backlog: the worker is stopped (then
 * `backlog.warmUp` runs, while nothing is applied), the backlog enqueued (until `count` requests or
 * the first 429: the bound is reached), the worker started again, then `measure` runs. `drainedAt` is when the backlog's last request was first seen done
 * (50 ms resolution), undefined when it was still draining as `measure` ended.
 */
export async function whileDraining<T>(
  layout: { stopWorker(): Promise<void>; startWorker(): Promise<void> },
  t: Target,
  backlog: { bodies: string[]; count: number; warmUp?: () => Promise<unknown> },
  measure: () => Promise<T>,
): Promise<{ result: T; backlog: ClosedLoopResult & { stoppedAt429: boolean }; workerReadyAt: number; drainedAt?: number }> {
  await layout.stopWorker()
  await backlog.warmUp?.()
  const sent = await closedLoop({
    count: backlog.count,
    concurrency: 32,
    stopAt429: true,
    send: (i) => post(t.urls[i % t.urls.length], t.key, '/users/track', backlog.bodies[i % backlog.bodies.length]),
  })
  await layout.startWorker()
  const workerReadyAt = performance.now()
  let drainedAt: number | undefined
  let measuring = true
  const last = sent.ids[sent.ids.length - 1]
  const watcher = (async () => {
    while (measuring && last) {
      const p = await progress(t.urls[0], t.key, last)
      if (p.status === 'done' || p.status === 'failed') {
        drainedAt = performance.now()
        return
      }
      await sleep(50)
    }
  })()
  const result = await measure()
  measuring = false
  await watcher
  return { result, backlog: sent, workerReadyAt, drainedAt }
}
