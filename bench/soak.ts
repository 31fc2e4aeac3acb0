// Steady under a long send: the mixed load (bench/mixed-load.ts) at a fixed rate near
// capacity for BENCH_SOAK_SECONDS (default 600) under `make run`'s layout, after a warm-up of
// BENCH_SOAK_WARMUP_SECONDS (default 120) at the same rates, reported apart: a freshly started
// service's first minutes are its start, not the drift a long send would show (code not yet
// optimized for the load in its first ~10 s; then new Postgres backends faulting in the shared
// buffers they touch, 4-5 times as many faults a second in the first 90 s as from the third
// minute on, and the backlog the slow start left being worked off). With small requests
// (1 attribute + 1 event) alongside at BENCH_SOAK_SMALL_RPS (default 50) whose latency is the
// "small-request p99". Postgres runs with autovacuum at its defaults (the bench's own server,
// bench/postgres.ts). Reported: applied objects/s, small-request p50/p99, cores in use and page
// faults a second of the first and the last minute and of every minute between, the dead-row share of the hot tables
// sampled every 30 s, and the exactness check of bench/mixed.ts once everything is applied.
//
// Usage: tsx bench/soak.ts [requests/s]: mixed requests (225 objects) a second, default
// BENCH_SOAK_RPS or 30. Prints one JSON line.
import pg from 'pg'
import { nearest, percentile, sleep } from './lib.js'
import { smallBody } from './ingest-load.js'
import { allFinished, openLoop, post, progress, round, summarize, type OpenLoopSample, type Target } from './load.js'
import { expected, MIXED_PER_KIND, mixedBody, mixedUsers } from './mixed-load.js'
import { meterCpu } from './cpu.js'
import { before, startMixed, stopAndCheck } from './mixed.js'
import { benchPostmasterPid } from './postgres.js'
import { readPreloaded } from './preload.js'

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const SECONDS = num('BENCH_SOAK_SECONDS', 600)
const RPS = Number(process.argv[2] ?? num('BENCH_SOAK_RPS', 30))
const SMALL_RPS = num('BENCH_SOAK_SMALL_RPS', 50)
const WARMUP_SECONDS = num('BENCH_SOAK_WARMUP_SECONDS', 120)
const SAMPLE_EVERY_MS = 30_000
const WINDOW_MS = Math.min(60_000, (SECONDS * 1000) / 3)
const HOT_TABLES = ['profiles', 'profile_aliases', 'applied_jobs']

interface DeadRows {
  atSeconds: number
  tables: Record<string, { live: number; dead: number; share: number; autovacuums: number; mb: number }>
  /** Cumulative WAL and checkpoint counters of the server (pg_stat_wal, pg_stat_bgwriter: Postgres 14-16). */
  server?: { walBytes: number; fullPageImages: number; checkpoints: number; checkpointBuffers: number }
}

/** The server's WAL and checkpoint counters; undefined where the views differ (Postgres 17 moved checkpoints). */
async function serverCounters(db: pg.Client): Promise<DeadRows['server']> {
  try {
    const { rows } = await db.query(
      `SELECT w.wal_bytes, w.wal_fpi, b.checkpoints_timed + b.checkpoints_req AS checkpoints, b.buffers_checkpoint
       FROM pg_stat_wal w, pg_stat_bgwriter b`,
    )
    const r = rows[0]
    return { walBytes: Number(r.wal_bytes), fullPageImages: Number(r.wal_fpi), checkpoints: Number(r.checkpoints), checkpointBuffers: Number(r.buffers_checkpoint) }
  } catch {
    return undefined
  }
}

async function deadRows(db: pg.Client, startedAt: number): Promise<DeadRows> {
  const { rows } = await db.query(
    `SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, pg_total_relation_size(relid) AS bytes
     FROM pg_stat_user_tables WHERE relname = ANY($1)`,
    [HOT_TABLES],
  )
  const tables: DeadRows['tables'] = {}
  for (const r of rows) {
    const live = Number(r.n_live_tup)
    const dead = Number(r.n_dead_tup)
    tables[r.relname] = { live, dead, share: live + dead ? round(dead / (live + dead)) : 0, autovacuums: Number(r.autovacuum_count), mb: Math.round(Number(r.bytes) / 2 ** 20) }
  }
  return { atSeconds: round((performance.now() - startedAt) / 1000), tables, server: await serverCounters(db) }
}

/**
 * The server's WAL written (MB/s), full-page images a second and checkpoints begun between the
 * samples nearest two instants (ms after the start): after a checkpoint begins, the first change
 * of each page writes the whole page to the WAL again.
 */
function serverBetween(samples: DeadRows[], from: number, to: number) {
  const [a, b] = [nearest(samples, (s) => s.atSeconds * 1000, from), nearest(samples, (s) => s.atSeconds * 1000, to)]
  const span = b.atSeconds - a.atSeconds
  if (!a.server || !b.server || span <= 0) return undefined
  return {
    walMbPerSecond: round((b.server.walBytes - a.server.walBytes) / 2 ** 20 / span),
    fullPageImagesPerSecond: Math.round((b.server.fullPageImages - a.server.fullPageImages) / span),
    checkpointsBegun: b.server.checkpoints - a.server.checkpoints,
    checkpointBuffers: b.server.checkpointBuffers - a.server.checkpointBuffers,
  }
}

/**
 * The applied frontier: how many of the mixed requests, in send order, are done, looked at every
 * second. Request order is not completion order across partitions, so this trails the true count
 * by at most what is in flight: a lower bound, the same at the start and the end of the run. A
 * request the API did not accept (`null`) owes nothing and is passed over; one not answered yet
 * (`undefined`) holds the frontier.
 */
function watchFrontier(t: Target, ids: (string | null | undefined)[], startedAt: number) {
  const points: { at: number; done: number }[] = []
  let stop = false
  let next = 0
  let done = 0
  const loop = (async () => {
    while (!stop) {
      for (; next < ids.length && ids[next] !== undefined; next++) {
        const id = ids[next]
        if (typeof id !== 'string') continue
        const p = await progress(t.urls[0], t.key, id)
        if (p.status !== 'done' && p.status !== 'failed') break
        done++
      }
      points.push({ at: performance.now() - startedAt, done })
      await sleep(1000)
    }
  })()
  return {
    points,
    async end() {
      stop = true
      await loop
    },
  }
}

/** Requests done a second between two instants (ms after the start), from the frontier's points. */
function rateBetween(points: { at: number; done: number }[], from: number, to: number): number {
  const a = nearest(points, (p) => p.at, from)
  const b = nearest(points, (p) => p.at, to)
  return b.at > a.at ? (b.done - a.done) / ((b.at - a.at) / 1000) : 0
}

function windowFigures(samples: OpenLoopSample[], from: number, to: number) {
  const s = summarize(samples.filter((x) => x.due >= from && x.due < to))
  return { count: s.count, p50Ms: s.p50Ms, p99Ms: s.p99Ms, failures: s.failures }
}

async function main() {
  const preloaded = readPreloaded()
  const count = Math.round(RPS * (WARMUP_SECONDS + SECONDS))
  const requests = mixedUsers(count, 2222)
  const run = await startMixed(preloaded)
  // Read for every user the load may name; compared for those of the requests accepted.
  const prior = await before(run, preloaded, expected(requests))
  const stats = new pg.Client({ connectionString: preloaded.databaseUrl })
  await stats.connect()

  const ids: (string | null | undefined)[] = new Array(count)
  const startedAt = performance.now()
  const samples: DeadRows[] = [await deadRows(stats, startedAt)]
  const sampler = setInterval(() => void deadRows(stats, startedAt).then((s) => samples.push(s)), SAMPLE_EVERY_MS)
  const frontier = watchFrontier(run.t, ids, startedAt)
  const cpu = meterCpu({ processes: run.layout.pids(), trees: { postgres: benchPostmasterPid() } })
  const url = run.t.urls[0]
  const [mixed, small] = await Promise.all([
    openLoop({
      rps: RPS,
      seconds: WARMUP_SECONDS + SECONDS,
      warmUpSeconds: 0,
      send: async (i) => {
        try {
          const a = await post(url, run.t.key, '/users/track', mixedBody(requests[i], i, run.tag))
          ids[i] = a.status >= 200 && a.status < 300 ? (a.requestId ?? null) : null
          return a
        } catch (e) {
          ids[i] = null
          throw e
        }
      },
    }),
    openLoop({ rps: SMALL_RPS, seconds: WARMUP_SECONDS + SECONDS, warmUpSeconds: 0, send: (i) => post(url, run.t.key, '/users/track', smallBody(`s${run.tag}-${i % 20_000}`)) }),
  ])
  const lastSendAt = performance.now()
  cpu.stop()
  const accepted = ids.filter((id): id is string => typeof id === 'string')
  const done = await allFinished(run.t, accepted, { pollMs: 50, deadline: lastSendAt + 600_000 })
  clearInterval(sampler)
  await frontier.end()
  samples.push(await deadRows(stats, startedAt))
  await stats.end()

  const t0 = (mixed.samples[0]?.due ?? startedAt) + WARMUP_SECONDS * 1000
  const end = t0 + SECONDS * 1000
  const at = (ms: number) => ms - startedAt
  const objectsPerRequest = MIXED_PER_KIND * 3
  // A window of the run: applied objects/s, small-request and mixed-request latency, cores in use.
  const windowAt = (from: number, ms = WINDOW_MS) => ({
    appliedPerSecond: Math.round(rateBetween(frontier.points, at(from), at(from + ms)) * objectsPerRequest),
    small: windowFigures(small.samples, from, from + ms),
    mixedApi: windowFigures(mixed.samples, from, from + ms),
    cores: cpu.coresBetween(from, from + ms),
    /** Minor page faults a second of each process group: a fresh service's backends and heaps fault their working set in at first. */
    faultsPerSecond: cpu.faultsPerSecondBetween(from, from + ms),
    postgres: serverBetween(samples, at(from), at(from + ms)),
  })
  const warmUp = WARMUP_SECONDS > 0 ? windowAt(t0 - WARMUP_SECONDS * 1000, WARMUP_SECONDS * 1000) : undefined
  const measured = (samples: OpenLoopSample[]) => samples.filter((x) => x.due >= t0)
  const firstMinute = windowAt(t0)
  const lastMinute = windowAt(end - WINDOW_MS)
  // Every minute, not only the first and the last: a drift shows as a trend, a stall as one minute.
  const minutes: ReturnType<typeof windowAt>[] = []
  for (let from = t0; from + WINDOW_MS <= end + 1; from += WINDOW_MS) minutes.push(windowAt(from))
  // The first sample is what earlier runs left; the last, taken once everything is applied, what this one leaves.
  const during = samples.slice(1, -1)
  const shares = (of: DeadRows[], pick: (xs: number[]) => number) =>
    Object.fromEntries(Object.keys(samples[0].tables).map((k) => [k, of.length ? pick(of.map((s) => s.tables[k]?.share ?? 0)) : 0]))
  // A request answered 429 was not accepted: what the service must hold is what it accepted.
  const checked = await stopAndCheck(run, preloaded, expected(requests, (i) => typeof ids[i] === 'string'), prior)
  console.log(
    JSON.stringify({
      seconds: SECONDS,
      rps: RPS,
      objectsPerSecondSent: RPS * objectsPerRequest,
      smallRps: SMALL_RPS,
      windowSeconds: WINDOW_MS / 1000,
      mixedRequests: count,
      mixedAccepted: accepted.length,
      mixedApi: summarize(measured(mixed.samples)),
      sendLagP99Ms: Math.max(mixed.sendLagP99Ms, small.sendLagP99Ms),
      allDoneAfterLastSendMs: done.doneAt === undefined ? null : Math.round(done.doneAt - lastSendAt),
      notDoneAtDeadline: done.pending,
      firstMinute,
      lastMinute,
      minutes,
      warmUpSeconds: WARMUP_SECONDS,
      warmUp,
      smallWhole: { ...summarize(measured(small.samples)), p999Ms: round(percentile(measured(small.samples).map((s) => s.latency).sort((a, b) => a - b), 99.9)) },
      deadRowShareAtStart: shares(samples.slice(0, 1), (xs) => xs[0]),
      deadRowShareMax: shares(during, (xs) => Math.max(...xs)),
      deadRowShareLast: shares(samples.slice(-1), (xs) => xs[0]),
      deadRows: samples,
      check: checked,
    }),
  )
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
