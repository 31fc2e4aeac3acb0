// Segment sizes in `make run`'s layout while a full-size track backlog drains (issue 20): the API
// process holds no ClickHouse and asks the worker process holding the embedded engine. The
// segment is the measured workspace's preloaded profiles (bench/preload.ts: last_name "Last",
// 100,000 of them at full size); newly tracked users never join it. Open loop: each read leaves
// at its scheduled instant and its latency counts from that instant.
// Usage: tsx bench/segment-size.ts [users]. Prints one JSON line.
import { randomBytes } from 'node:crypto'
import { dropQueueKeys, sleep } from './lib.js'
import { requestsFor, trackBody, PER_KIND } from './ingest-load.js'
import { startLayout } from './layout.js'
import { closedLoop, openLoop, post, progress, request, round, summarize, type Answer } from './load.js'
import { readPreloaded, serviceEnv } from './preload.js'

const USERS = Number(process.argv[2] ?? 100_000)
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const READ_RPS = num('BENCH_SEGMENT_RPS', 5)
const READ_SECONDS = num('BENCH_SEGMENT_SECONDS', 20)
const BACKLOG_REQUESTS = num('BENCH_DRAIN_REQUESTS', 2 * requestsFor(USERS))

async function main() {
  const preloaded = readPreloaded()
  const env = serviceEnv(preloaded)
  const layout = await startLayout('split', env)
  const api = layout.apis[0]
  const ws = preloaded.workspace.id
  const tag = randomBytes(3).toString('hex')
  try {
    const created = await request('POST', api, `/admin/v1/workspaces/${ws}/segments`, preloaded.adminToken, JSON.stringify({ name: `bench-${tag}`, filter: { field: 'last_name', op: 'eq', value: 'Last' } }))
    if (created.status !== 201) throw new Error(`segment: ${created.status} ${created.body}`)
    const segmentPath = `/admin/v1/workspaces/${ws}/segments/${JSON.parse(created.body).segment_id}`
    const sizes: number[] = []
    const read = async (): Promise<Answer> => {
      try {
        const r = await request('GET', api, segmentPath, preloaded.adminToken)
        if (r.status === 200) sizes.push(JSON.parse(r.body).size)
        return { status: r.status, reason: r.status === 200 ? undefined : r.body.slice(0, 200) }
      } catch (e) {
        return { status: 0, reason: (e as NodeJS.ErrnoException).code ?? (e as Error).message }
      }
    }
    // At rest first: the read's own cost, without a backlog.
    const atRest = await openLoop({ rps: READ_RPS, seconds: Math.min(READ_SECONDS, 10), warmUpSeconds: 2, send: read })

    await layout.stopWorker()
    const bodies = Array.from({ length: requestsFor(USERS) }, (_, i) => trackBody(i, USERS, `g${tag}-`))
    const backlog = await closedLoop({
      count: BACKLOG_REQUESTS,
      concurrency: 32,
      stopAt429: true,
      send: (i) => post(api, preloaded.workspace.key, '/users/track', bodies[i % bodies.length]),
    })
    await layout.startWorker()
    let drainedAt: number | undefined
    let measuring = true
    const last = backlog.ids[backlog.ids.length - 1]
    const watcher = (async () => {
      while (measuring && last) {
        const p = await progress(api, preloaded.workspace.key, last)
        if (p.status === 'done' || p.status === 'failed') return void (drainedAt = performance.now())
        await sleep(50)
      }
    })()
    const run = await openLoop({ rps: READ_RPS, seconds: READ_SECONDS, warmUpSeconds: 0, send: read })
    measuring = false
    await watcher
    const during = run.samples.filter((s) => drainedAt === undefined || s.due < drainedAt)
    console.log(
      JSON.stringify({
        users: USERS,
        segmentSize: sizes[0] ?? null,
        sizesSeen: [...new Set(sizes)],
        rps: READ_RPS,
        atRest: summarize(atRest.samples),
        duringDrain: summarize(during),
        secondsWhileDraining: round(((drainedAt ?? run.lastSendAt) - (run.samples[0]?.due ?? 0)) / 1000),
        backlogObjects: backlog.ids.length * PER_KIND * 3,
        drainedDuringWindow: drainedAt !== undefined,
      }),
    )
  } finally {
    await layout.stop()
    await dropQueueKeys(env.QUEUE_PREFIX)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
