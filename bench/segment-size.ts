// Segment sizes in `make run`'s layout while a full-size track backlog drains: the API
// process holds no ClickHouse and asks the worker process holding the embedded engine. The
// segment is `users` new profiles of the measured workspace (100,000 at full size) given a home
// city of their own before the measure, so its size does not depend on what the parts before it
// did to the preloaded profiles; the backlog's users never join it. Open loop: each read leaves
// at its scheduled instant and its latency counts from that instant. A backlog drains in 5-20 s,
// 25-100 reads at 5/s, whose p99 is their slowest one: the reads of BENCH_SEGMENT_DRAINS drains
// (default 4, each of new users) are pooled, and each drain's slowest read reported beside.
// Usage: tsx bench/segment-size.ts [users]. Prints one JSON line.
import { randomBytes } from 'node:crypto'
import { cityBodies, requestsFor, trackBody, PER_KIND } from './ingest-load.js'
import { withLayout } from './layout.js'
import { fullLoad, openLoop, request, round, summarize, whileDraining, type Answer } from './load.js'
import { readPreloaded, serviceEnv } from './preload.js'

const USERS = Number(process.argv[2] ?? 100_000)
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const READ_RPS = num('BENCH_SEGMENT_RPS', 5)
const READ_SECONDS = num('BENCH_SEGMENT_SECONDS', 20)
const BACKLOG_REQUESTS = num('BENCH_DRAIN_REQUESTS', 2 * requestsFor(USERS))
const DRAINS = num('BENCH_SEGMENT_DRAINS', 4)

async function main() {
  const preloaded = readPreloaded()
  const env = serviceEnv(preloaded)
  await withLayout('split', env, async (layout) => {
    const api = layout.apis[0]
    const ws = preloaded.workspace.id
    const tag = randomBytes(3).toString('hex')
    const city = `segment-${tag}`
    const members = cityBodies(USERS, `m${tag}-`, city)
    const seeded = await fullLoad({ urls: [api], key: preloaded.workspace.key }, members, { concurrency: 32, objects: USERS, deadlineMs: 600_000 })
    if (seeded.done.doneAt === undefined || seeded.done.failed) throw new Error(`segment members not applied: ${JSON.stringify(seeded.figures)}`)
    const created = await request(api, preloaded.adminToken, {
      method: 'POST',
      path: `/admin/v1/workspaces/${ws}/segments`,
      body: JSON.stringify({ name: `bench-${tag}`, filter: { field: 'home_city', op: 'eq', value: city } }),
    })
    if (created.status !== 201) throw new Error(`segment: ${created.status} ${created.body}`)
    const segmentPath = `/admin/v1/workspaces/${ws}/segments/${JSON.parse(created.body).segment_id}`
    const sizes: number[] = []
    const read = async (): Promise<Answer> => {
      try {
        const r = await request(api, preloaded.adminToken, { method: 'GET', path: segmentPath })
        if (r.status === 200) sizes.push(JSON.parse(r.body).size)
        return { status: r.status, reason: r.status === 200 ? undefined : r.body.slice(0, 200) }
      } catch (e) {
        return { status: 0, reason: (e as NodeJS.ErrnoException).code ?? (e as Error).message }
      }
    }
    // At rest first: the read's own cost, without a backlog.
    const atRest = await openLoop({ rps: READ_RPS, seconds: Math.min(READ_SECONDS, 10), warmUpSeconds: 2, send: read })

    const target = { urls: [api], key: preloaded.workspace.key }
    const drains = []
    for (let d = 0; d < DRAINS; d++) {
      const bodies = Array.from({ length: requestsFor(USERS) }, (_, i) => trackBody(i, USERS, `g${tag}${d}-`))
      const { result: run, drainedAt, backlog } = await whileDraining(layout, target, { bodies, count: BACKLOG_REQUESTS }, () =>
        openLoop({ rps: READ_RPS, seconds: READ_SECONDS, warmUpSeconds: 0, send: read }),
      )
      drains.push({
        samples: run.samples.filter((s) => drainedAt === undefined || s.due < drainedAt),
        seconds: round(((drainedAt ?? run.lastSendAt) - (run.samples[0]?.due ?? 0)) / 1000),
        backlogObjects: backlog.ids.length * PER_KIND * 3,
        drained: drainedAt !== undefined,
      })
    }
    console.log(
      JSON.stringify({
        users: USERS,
        segmentSize: sizes[0] ?? null,
        sizesSeen: [...new Set(sizes)],
        rps: READ_RPS,
        atRest: summarize(atRest.samples),
        duringDrain: summarize(drains.flatMap((d) => d.samples)),
        drains: drains.map((d) => ({ reads: d.samples.length, slowestMs: round(Math.max(0, ...d.samples.map((x) => x.latency))), seconds: d.seconds })),
        secondsWhileDraining: round(drains.reduce((n, d) => n + d.seconds, 0)),
        backlogObjects: drains[0]?.backlogObjects ?? 0,
        drainedDuringWindow: drains.every((d) => d.drained),
      }),
    )
  })
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
