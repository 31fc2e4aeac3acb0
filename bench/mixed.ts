// The mixed load (bench/mixed-load.ts) applied end to end under `make run`'s layout (split: one
// API process, one worker process at a lower CPU priority) on the preloaded database, 32 requests in flight,
// then every object checked (bench/mixed-check.ts). Usage: tsx bench/mixed.ts [users]: the load
// has as many requests as the ingest load for that many users (1,333 for 100,000: 300,000 objects).
// A warm-up of BENCH_MIXED_WARMUP_REQUESTS (400) requests of the same kind goes first, reported
// apart: the services and Postgres were just started, and a service that has run for a while has
// compiled its code and holds its users' pages in shared buffers (as the raw floor's table is,
// written just before its clock starts). Prints one JSON line.
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import pg from 'pg'
import { dropQueueKeys } from './lib.js'
import { requestsFor } from './ingest-load.js'
import { benchWorkers, startLayout, type Layout } from './layout.js'
import { meterCpu, pageFaultMicros, threadSeconds } from './cpu.js'
import { fullLoad, round, type Target } from './load.js'
import { check, loginsSum, readProfiles, sampleOf, type State } from './mixed-check.js'
import { expected, MIXED_PER_KIND, mixedBody, mixedUsers, preloadedExternalIds, setupBodies, type Expected } from './mixed-load.js'
import { sampleLockWaits } from './pg-activity.js'
import { benchPostmasterPid } from './postgres.js'
import { readPreloaded, serviceEnv, type Preloaded } from './preload.js'

const USERS = Number(process.argv[2] ?? 100_000)
const CONCURRENCY = 32
const APPLY_DEADLINE_MS = Number(process.env.BENCH_APPLY_DEADLINE_SECONDS ?? 600) * 1000
const WARM_UP_REQUESTS = Number(process.env.BENCH_MIXED_WARMUP_REQUESTS ?? 400)
/** Another draw than the measured load's (seed 22); its new users carry their own tag, so the check never sees them. */
const WARM_UP_SEED = 23

/** Sends bodies 32 in flight and waits until every one is done (`fullLoad`). */
const sendAll = (t: Target, bodies: string[]) =>
  fullLoad(t, bodies, { concurrency: CONCURRENCY, objects: bodies.length * MIXED_PER_KIND * 3, deadlineMs: APPLY_DEADLINE_MS })

/** `sendAll` for load that only prepares the measured one: every request must apply whole. */
async function sendAllApplied(t: Target, bodies: string[], what: string) {
  const run = await sendAll(t, bodies)
  if (run.done.doneAt === undefined || run.done.failed || run.done.withErrors) throw new Error(`${what} not applied: ${JSON.stringify(run.done)}`)
  return run
}

export interface MixedRun {
  layout: Layout
  t: Target
  db: pg.Client
  tag: string
  queuePrefix: string
  setupSeconds: number
}

/**
 * Starts the split layout on the preloaded database and makes the load's existing alias and phone
 * users exist (the same every run; not measured). The caller stops the layout and closes `db`.
 */
export async function startMixed(preloaded: Preloaded): Promise<MixedRun> {
  const env = serviceEnv(preloaded)
  const layout = await startLayout('split', env)
  const t: Target = { urls: layout.apis, key: preloaded.workspace.key }
  const db = new pg.Client({ connectionString: preloaded.databaseUrl })
  await db.connect()
  const started = performance.now()
  await sendAllApplied(t, setupBodies(await goneFromPreload(db, preloaded)), 'setup')
  return { layout, t, db, tag: randomBytes(3).toString('hex'), queuePrefix: env.QUEUE_PREFIX, setupSeconds: round((performance.now() - started) / 1000) }
}

/** The load's preloaded profiles that are no longer there (an earlier part merged or deleted them). */
async function goneFromPreload(db: pg.Client, preloaded: Preloaded): Promise<Set<string>> {
  const expected = preloadedExternalIds()
  const r = await db.query<{ external_id: string }>('SELECT external_id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2::text[])', [
    preloaded.workspace.id,
    expected,
  ])
  const present = new Set(r.rows.map((row) => row.external_id))
  return new Set(expected.filter((id) => !present.has(id)))
}

/** State read before the load, for the check after it. */
export async function before(run: MixedRun, preloaded: Preloaded, e: Map<number, Expected>): Promise<{ state: State; logins: number }> {
  return { state: await readProfiles(run.db, preloaded.workspace.id, sampleOf(e), run.tag), logins: await loginsSum(run.db, preloaded.workspace.id) }
}

/** Stops the layout, then reads back and compares (ClickHouse can be opened only once the worker has let it go). */
export async function stopAndCheck(run: MixedRun, preloaded: Preloaded, e: Map<number, Expected>, prior: { state: State; logins: number }) {
  await run.layout.stop()
  const after = await readProfiles(run.db, preloaded.workspace.id, sampleOf(e), run.tag)
  const loginsAdded = (await loginsSum(run.db, preloaded.workspace.id)) - prior.logins
  await run.db.end()
  await dropQueueKeys(run.queuePrefix)
  return check({ preloaded, tag: run.tag, expected: e, before: prior.state, after, loginsAdded })
}

async function main() {
  const preloaded = readPreloaded()
  const requests = mixedUsers(requestsFor(USERS))
  const e = expected(requests)
  const run = await startMixed(preloaded)
  const warmUp =
    WARM_UP_REQUESTS > 0 ? await sendAllApplied(run.t, mixedUsers(WARM_UP_REQUESTS, WARM_UP_SEED).map((r, i) => mixedBody(r, i, `${run.tag}w`)), 'warm-up') : undefined
  const prior = await before(run, preloaded, e)
  const bodies = requests.map((r, i) => mixedBody(r, i, run.tag))
  const cpu = meterCpu({ processes: run.layout.pids(), trees: { postgres: benchPostmasterPid() } })
  const [worker] = run.layout.pids().worker
  const workerThreadsBefore = threadSeconds(worker)
  const statements = await sampleLockWaits(preloaded.databaseUrl)
  const { sent, done, figures } = await sendAll(run.t, bodies)
  const cpuSeconds = cpu.stop()
  const pageFaults = cpu.faults()
  const lockWaits = await statements.stop()
  const workerThreadsAfter = threadSeconds(worker)
  const workerThreads = Object.fromEntries(Object.entries(workerThreadsAfter).map(([kind, s]) => [kind, round(s - workerThreadsBefore[kind])]))
  const cores = {
    accepting: cpu.coresBetween(sent.startedAt, sent.acceptedAt),
    draining: done.doneAt === undefined ? undefined : cpu.coresBetween(sent.acceptedAt, done.doneAt),
  }
  const checked = await stopAndCheck(run, preloaded, e, prior)
  console.log(
    JSON.stringify({
      mode: 'mixed',
      layout: 'split',
      workers: benchWorkers(),
      preloaded: { profiles: preloaded.profiles, events: preloaded.events },
      ...figures,
      attributeRows: bodies.length * MIXED_PER_KIND,
      eventRows: bodies.length * MIXED_PER_KIND * 2,
      distinctUsers: e.size,
      /** CPU seconds of the service's processes from the first request sent to the last seen done. */
      cpuSeconds,
      /** Minor page faults of the same processes over the same span, and the CPU one costs on this machine (us, measured after the part). */
      pageFaults,
      pageFaultMicros: pageFaultMicros(),
      /** The worker's CPU seconds over the same span by kind of thread (bench/cpu.ts threadSeconds). */
      workerThreads,
      /** Cores in use while the API accepted the load, and from then to the last request seen done. */
      cores,
      /** The service's running statements sampled every 100 ms over the same span, and how many waited for a lock. */
      lockWaits,
      setupSeconds: run.setupSeconds,
      /** The warm-up's own figures (not counted above). Absent from results written before it ran. */
      warmUp: warmUp?.figures,
      check: checked,
    }),
  )
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.dirname, 'mixed.ts')) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
