// Ingestion through the running service on the preloaded database (bench/preload.ts), in the
// embedded or the split layout (bench/layout.ts). Usage: tsx bench/ingest.ts embedded|split [users].
// Prints one JSON line: the full-size load, and in the split layout the small requests' figures
// (a fixed rate after the full load: its API latency, accepted -> done, and while a backlog drains).
import { randomBytes } from 'node:crypto'
import { PER_KIND, requestsFor, smallBody, trackBody } from './ingest-load.js'
import { workerPriority } from '../bin/process-flags.js'
import { benchWorkers, withLayout, type Layout } from './layout.js'
import { acceptedToDone, allFinished, fullLoad, openLoop, post, round, summarize, whileDraining, type Target } from './load.js'
import { meterCpu } from './cpu.js'
import { benchPostmasterPid } from './postgres.js'
import { readPreloaded, serviceEnv } from './preload.js'

const mode = process.argv[2] === 'split' ? 'split' : 'embedded'
const USERS = Number(process.argv[3] ?? 100_000)
const REQUESTS = requestsFor(USERS)
const CONCURRENCY = 32
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const WARM_UP_SECONDS = num('BENCH_WARMUP_SECONDS', 3)
const SMALL = { rps: num('BENCH_SMALL_RPS', 1000), seconds: num('BENCH_SMALL_SECONDS', 10) }
const DRAIN = { rps: num('BENCH_DRAIN_RPS', 500), seconds: num('BENCH_DRAIN_SECONDS', 10), requests: num('BENCH_DRAIN_REQUESTS', 2 * REQUESTS) }
const REST = { rps: num('BENCH_REST_RPS', 10), seconds: num('BENCH_REST_SECONDS', 20), pollMs: 5 }
/** How long to wait for applied work before reporting what is still pending. */
const APPLY_DEADLINE_MS = num('BENCH_APPLY_DEADLINE_SECONDS', 600) * 1000
const SMALL_DONE_DEADLINE_MS = 120_000

/** Full-size load, 32 in flight (`fullLoad`), with the rows it holds. */
async function fullIngest(t: Target, bodies: string[]) {
  const { figures } = await fullLoad(t, bodies, { concurrency: CONCURRENCY, objects: bodies.length * PER_KIND * 3, deadlineMs: APPLY_DEADLINE_MS })
  return { ...figures, attributeRows: bodies.length * PER_KIND, eventRows: bodies.length * PER_KIND * 2 }
}

/**
 * Small requests at a fixed rate with the worker applying them: API latency, how long after the
 * last send every request is `done`, and what they cost: the cores each process used from the
 * first send (warm-up included) to the last request done, and so each one's CPU per request.
 * Whether the machine was full tells a saturated machine's p99 from a service's stall.
 */
async function smallAtRate(layout: Layout, t: Target, prefix: string) {
  const cpu = meterCpu({ processes: layout.pids(), trees: { postgres: benchPostmasterPid() } })
  const startedAt = performance.now()
  const run = await openLoop({ ...SMALL, warmUpSeconds: WARM_UP_SECONDS, send: smallSender(t, prefix) })
  const ids = run.samples.filter((s) => s.requestId && s.status < 300).map((s) => s.requestId!)
  const c = await allFinished(t, ids, { pollMs: 10, deadline: run.lastSendAt + SMALL_DONE_DEADLINE_MS })
  cpu.stop()
  const cores = c.doneAt === undefined ? undefined : cpu.coresBetween(startedAt, c.doneAt)
  const sent = Math.round(SMALL.rps * (SMALL.seconds + WARM_UP_SECONDS))
  const span = c.doneAt === undefined ? 0 : (c.doneAt - startedAt) / 1000
  const cpuMsPerRequest = cores && Object.fromEntries(['api', 'worker', 'postgres'].map((name) => [name, round((cores[name] * span * 1000) / sent)]))
  return {
    rps: run.rps,
    seconds: run.seconds,
    warmUpSeconds: run.warmUpSeconds,
    ...summarize(run.samples),
    sendLagP99Ms: run.sendLagP99Ms,
    /** Last send to every accepted request seen `done`; null when some were not done 120 s after. */
    allDoneAfterLastSendMs: c.doneAt === undefined ? null : Math.round(c.doneAt - run.lastSendAt),
    notDoneAtDeadline: c.pending,
    failedApplying: c.failed,
    completionResolutionMs: c.pollMs,
    /** Cores in use from the first send to the last request seen done: api, worker, postgres, idle, other (Redis, the sender). */
    cores,
    cpuMsPerRequest,
  }
}

/**
 * API latency of small requests while the worker drains a full-size backlog: the worker is stopped,
 * the backlog enqueued (until its count or the first 429: the bound is reached), the worker started
 * again, and small requests sent at a fixed rate. Only requests scheduled before the backlog's last
 * request was done count (drained the whole window when `drainedAfterMs` is null).
 */
async function duringDrain(layout: Layout, t: Target, bodies: string[], prefix: string) {
  const send = smallSender(t, prefix)
  // The warm-up (the API's connections and code paths) runs before the backlog, while nothing is applied.
  const warmUp = () => openLoop({ rps: DRAIN.rps, seconds: 0, warmUpSeconds: WARM_UP_SECONDS, send })
  const { result: run, drainedAt, workerReadyAt, backlog } = await whileDraining(layout, t, { bodies, count: DRAIN.requests, warmUp }, () =>
    openLoop({ rps: DRAIN.rps, seconds: DRAIN.seconds, warmUpSeconds: 0, send }),
  )
  const during = run.samples.filter((s) => drainedAt === undefined || s.due < drainedAt)
  const measuredUntil = Math.min(drainedAt ?? Infinity, run.lastSendAt)
  return {
    rps: run.rps,
    seconds: run.seconds,
    ...summarize(during),
    sendLagP99Ms: run.sendLagP99Ms,
    /** Seconds of the window during which the backlog was still draining. */
    secondsWhileDraining: round(Math.max(0, measuredUntil - (run.samples[0]?.due ?? measuredUntil)) / 1000),
    backlogRequests: backlog.ids.length,
    backlogObjects: backlog.ids.length * PER_KIND * 3,
    backlogStoppedAt429: backlog.stoppedAt429,
    /** From the worker's readiness to the backlog's last request `done` (50 ms resolution); null: still draining at the end. */
    drainedAfterMs: drainedAt === undefined ? null : Math.round(drainedAt - workerReadyAt),
    wholeWindow: summarize(run.samples),
  }
}

function smallSender(t: Target, prefix: string) {
  return (i: number) => post(t.urls[i % t.urls.length], t.key, '/users/track', smallBody(`${prefix}${i % 20_000}`))
}

async function main() {
  const preloaded = readPreloaded()
  const env = serviceEnv(preloaded)
  await withLayout(mode, env, async (layout) => {
    const t: Target = { urls: layout.apis, key: preloaded.workspace.key }
    // A tag per run keeps every user new, whatever earlier runs left in the preloaded database.
    const tag = randomBytes(3).toString('hex')
    const bodies = Array.from({ length: REQUESTS }, (_, i) => trackBody(i, USERS, `${mode[0]}${tag}-`))
    const full = await fullIngest(t, bodies)
    let figures: Record<string, unknown> = {}
    // BENCH_INGEST_FULL_ONLY: the full-size load alone (the pool part compares worker counts on it).
    if (mode === 'split' && !process.env.BENCH_INGEST_FULL_ONLY) {
      const smallRequests = await smallAtRate(layout, t, `s${tag}-`)
      // Each request's own figure stays out of the results.
      const { each, ...atRest } = await acceptedToDone({ ...REST, warmUpSeconds: Math.min(WARM_UP_SECONDS, 2), send: smallSender(t, `r${tag}-`) }, t)
      const duringDrainFigure = await duringDrain(layout, t, bodies, `d${tag}-`)
      figures = { smallRequests, acceptedToDone: atRest, duringDrain: duringDrainFigure }
    }
    console.log(
      JSON.stringify({
        mode,
        users: USERS,
        processes: mode === 'split' ? { api: 1, worker: benchWorkers(), workerPriority: workerPriority().join(' ') } : { all: 1 },
        preloaded: { profiles: preloaded.profiles, events: preloaded.events },
        ...full,
        ...figures,
      }),
    )
  })
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
