// Identity at realistic sizes, in the split layout on the preloaded database: merges/s
// and deletes/s through /users/merge and /users/delete (requests of 50 operations, users of the
// measured workspace that have history), and accepted -> done of a single merge at rest.
// Usage: tsx bench/identity.ts [slot]. Slot 0 or 1 picks which half of the measured workspace's
// profiles it uses, so two runs in one preload (1M then 10M events) touch different users.
// Each phase stops waiting at BENCH_IDENTITY_SECONDS (60) and reports the rate reached; a warm-up of
// BENCH_IDENTITY_WARMUP_OPS merges (1,000) runs first and is reported apart. Prints one JSON line.
import { dropQueueKeys, percentile, pool, sleep } from './lib.js'
import { startLayout, type Layout } from './layout.js'
import { allFinished, closedLoop, post, request, round, timeToDone, type Target } from './load.js'
import { readPreloaded, serviceEnv } from './preload.js'

const SLOT = Number(process.argv[2] ?? 0)
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const OPS = num('BENCH_IDENTITY_OPS', 10_000)
// Merges sent before anything is measured: the first identity work after a fresh preload runs ~20%
// slower than the same work later, whichever users it touches.
const WARM_UP_OPS = num('BENCH_IDENTITY_WARMUP_OPS', 1_000)
const CAP_MS = num('BENCH_IDENTITY_SECONDS', 60) * 1000
const SINGLES = num('BENCH_IDENTITY_SINGLES', 50)
const SINGLES_SECONDS = 20
const PER_REQUEST = 50
const CONCURRENCY = 8
const POLL_MS = 5

const user = (n: number) => ({ external_id: `p${n}` })

interface Phase {
  kind: 'merge' | 'delete'
  operations: number
  requests: number
  /** First request sent to the last seen `done`, or to the cap. */
  seconds: number
  capped: boolean
  /** All operations when every request finished; past the cap, the identifiers already gone. */
  operationsDone: number
  operationsPerSecond: number
  acceptSeconds: number
  retried429: number
  failedRequests: number
  /** Requests whose progress lists errors (an operation that found no user): 0 when the benchmark's users are right. */
  requestsWithErrors: number
}

/** Identifiers of `ids` that no profile answers to any more (read back through /users/export/ids). */
async function countGone(t: Target, ids: string[]): Promise<number> {
  const chunks = Array.from({ length: Math.ceil(ids.length / PER_REQUEST) }, (_, i) => ids.slice(i * PER_REQUEST, (i + 1) * PER_REQUEST))
  const gone = await pool(chunks.length, 8, async (i) => {
    const r = await request(t.urls[0], t.key, { method: 'POST', path: '/users/export/ids', body: JSON.stringify({ external_ids: chunks[i], fields_to_export: ['external_id'] }) })
    if (r.status !== 201) throw new Error(`/users/export/ids answered ${r.status}`)
    return (JSON.parse(r.body) as { invalid_user_ids?: string[] }).invalid_user_ids?.length ?? 0
  })
  return gone.reduce((a, b) => a + b, 0)
}

/**
 * Sends every request (8 in flight), then waits until all are `done`, at most the cap. Past the
 * cap, the operations applied are the identifiers that no longer name a profile (a merged or
 * deleted user), read back through /users/export/ids.
 */
async function phase(t: Target, kind: Phase['kind'], requests: { body: string; removed: string[] }[]): Promise<Phase> {
  const path = kind === 'merge' ? '/users/merge' : '/users/delete'
  const sent = await closedLoop({ count: requests.length, concurrency: CONCURRENCY, send: (i) => post(t.urls[i % t.urls.length], t.key, path, requests[i].body) })
  const c = await allFinished(t, sent.ids, { pollMs: 20, deadline: sent.startedAt + CAP_MS })
  const removed = requests.flatMap((r) => r.removed)
  const capped = c.doneAt === undefined
  const seconds = capped ? (performance.now() - sent.startedAt) / 1000 : (c.doneAt! - sent.startedAt) / 1000
  const operationsDone = capped ? await countGone(t, removed) : removed.length
  return {
    kind,
    operations: removed.length,
    requests: requests.length,
    seconds: round(seconds),
    capped,
    operationsDone,
    operationsPerSecond: Math.round(operationsDone / seconds),
    acceptSeconds: round((sent.acceptedAt - sent.startedAt) / 1000),
    retried429: sent.retried429,
    failedRequests: c.failed,
    requestsWithErrors: c.withErrors,
  }
}

/**
 * One merge at a time, the service otherwise idle: send to first `done`, polled every 5 ms; at
 * most SINGLES_SECONDS of them.
 */
async function singleMerges(t: Target, pairs: [number, number][]) {
  const ms: number[] = []
  const end = performance.now() + SINGLES_SECONDS * 1000
  for (const [keep, merge] of pairs) {
    if (performance.now() > end) break
    const t0 = performance.now()
    const a = await post(t.urls[0], t.key, '/users/merge', JSON.stringify({ merge_updates: [{ identifier_to_merge: user(merge), identifier_to_keep: user(keep) }] }))
    if (a.status >= 300 || !a.requestId) throw new Error(`/users/merge answered ${a.status || a.reason}`)
    ms.push((await timeToDone({ url: t.urls[0], key: t.key }, { id: a.requestId, since: t0, pollMs: POLL_MS })).ms)
    await sleep(100)
  }
  ms.sort((a, b) => a - b)
  return { merges: ms.length, p50Ms: round(percentile(ms, 50)), p99Ms: round(percentile(ms, 99)), maxMs: round(ms[ms.length - 1] ?? 0), pollMs: POLL_MS }
}

async function main() {
  const preloaded = readPreloaded()
  const half = Math.floor(preloaded.workspace.profiles / 2)
  let next = SLOT * half + 1
  const take = (n: number) => Array.from({ length: n }, () => next++)
  const singles = Math.min(SINGLES, Math.floor(half / 10))
  const warmUpOps = Math.min(WARM_UP_OPS, Math.floor(half / 20))
  const ops = Math.min(OPS, Math.floor((half - 2 * singles - 2 * warmUpOps) / 3))
  if (ops < 1) throw new Error(`the measured workspace holds too few profiles (${preloaded.workspace.profiles}) for the identity benchmark`)

  const singlePairs = Array.from({ length: singles }, () => take(2) as [number, number])
  const mergeRequests = (count: number) => {
    const requests: { body: string; removed: string[] }[] = []
    for (let i = 0; i < count; i += PER_REQUEST) {
      const pairs = Array.from({ length: Math.min(PER_REQUEST, count - i) }, () => take(2))
      requests.push({
        body: JSON.stringify({ merge_updates: pairs.map(([keep, merge]) => ({ identifier_to_merge: user(merge), identifier_to_keep: user(keep) })) }),
        removed: pairs.map(([, merge]) => `p${merge}`),
      })
    }
    return requests
  }
  const warmUp = mergeRequests(warmUpOps)
  const merges = mergeRequests(ops)
  const deletes: { body: string; removed: string[] }[] = []
  for (let i = 0; i < ops; i += PER_REQUEST) {
    const ids = take(Math.min(PER_REQUEST, ops - i)).map((n) => `p${n}`)
    deletes.push({ body: JSON.stringify({ external_ids: ids }), removed: ids })
  }

  const prefixes: string[] = []
  const start = async () => {
    const env = serviceEnv(preloaded)
    prefixes.push(env.QUEUE_PREFIX)
    return startLayout('split', env)
  }
  let layout: Layout = await start()
  try {
    const target = (): Target => ({ urls: layout.apis, key: preloaded.workspace.key })
    const warmUpPhase = warmUp.length ? await phase(target(), 'merge', warmUp) : undefined
    const singleMerge = await singleMerges(target(), singlePairs)
    const mergePhase = await phase(target(), 'merge', merges)
    if (mergePhase.capped) {
      // What the capped phase left queued must not count against the next one: new queues.
      await layout.stop()
      layout = await start()
    }
    const deletePhase = await phase(target(), 'delete', deletes)
    console.log(
      JSON.stringify({ preloaded: { profiles: preloaded.profiles, events: preloaded.events }, slot: SLOT, capSeconds: CAP_MS / 1000, warmUp: warmUpPhase, singleMerge, merges: mergePhase, deletes: deletePhase }),
    )
  } finally {
    await layout.stop()
    for (const p of prefixes) await dropQueueKeys(p)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
