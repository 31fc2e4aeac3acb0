// Ingestion through the running service: embedded (one process) or split (2 API processes + 1 worker process).
// Usage: tsx bench/ingest.ts embedded|split [users]. Prints one JSON line.
import { randomBytes } from 'node:crypto'
import type { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { loadConfig } from '../shared/config.js'
import { QueueRegistry, queueNamesFor } from '../shared/queue/queues.js'
import { adminToken, credentials, dropQueueKeys, freshDatabase, percentile, pool, startService, stopService, tempDir, type ServiceProcess } from './lib.js'

const mode = process.argv[2] === 'split' ? 'split' : 'embedded'
const USERS = Number(process.argv[3] ?? 100_000)
const PER_KIND = 75
const REQUESTS = Math.ceil(USERS / PER_KIND)
const CONCURRENCY = 32

function trackBody(i: number) {
  const users = Array.from({ length: PER_KIND }, (_, j) => `u${(i * PER_KIND + j) % USERS}`)
  const time = new Date(Date.now() - (i % 1000) * 1000).toISOString()
  return {
    attributes: users.map((u, j) => ({ external_id: u, first_name: `n${j}`, score: { inc: 1 }, plan: j % 2 ? 'gold' : 'free' })),
    events: users.map((u) => ({ external_id: u, name: 'played', time, properties: { level: i % 10, items: [{ id: 1 }] } })),
    purchases: users.map((u) => ({ external_id: u, product_id: 'sku-1', currency: 'USD', price: 1.5, quantity: 1, time })),
  }
}

async function main() {
  const dataDir = tempDir(`uds-bench-${mode}-`)
  const env = {
    DATABASE_URL: await freshDatabase(`uds_bench_${mode}`),
    DATA_DIR: dataDir,
    QUEUE_PREFIX: `udsbench${randomBytes(3).toString('hex')}`,
    ...(process.env.TRACK_PARTITIONS && { TRACK_PARTITIONS: process.env.TRACK_PARTITIONS }),
  }
  const services: ServiceProcess[] = []
  const apis: string[] = []
  if (mode === 'embedded') {
    const s = await startService([], env, 3901)
    services.push(s)
    apis.push(s.url)
  } else {
    services.push(await startService(['worker'], env, 3909))
    for (const port of [3902, 3903]) {
      const s = await startService(['api'], env, port)
      services.push(s)
      apis.push(s.url)
    }
  }
  const { api_key: key, workspace_id: ws } = credentials(dataDir)
  const admin = adminToken(dataDir)
  await fetch(`${apis[0]}/admin/v1/workspaces/${ws}/rate_limits`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ default_per_hour: 1e9, endpoints: { '/users/track': { limit: 1e9, window_seconds: 1 } } }),
  })
  await new Promise((r) => setTimeout(r, 1100))

  const bodies = Array.from({ length: REQUESTS }, (_, i) => JSON.stringify(trackBody(i)))
  const latencies: number[] = []
  const requestIds: string[] = []
  const started = performance.now()
  await pool(REQUESTS, CONCURRENCY, async (i) => {
    const t0 = performance.now()
    const r = await fetch(`${apis[i % apis.length]}/users/track`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: bodies[i],
    })
    await r.arrayBuffer()
    latencies.push(performance.now() - t0)
    if (r.status !== 201) throw new Error(`track answered ${r.status}`)
    requestIds[i] = r.headers.get('x-request-id')!
  })
  const accepted = performance.now()
  for (const id of requestIds) {
    for (;;) {
      const r = await fetch(`${apis[0]}/requests/${id}`, { headers: { authorization: `Bearer ${key}` } })
      const body = (await r.json()) as { status: string }
      if (body.status === 'done') break
      if (body.status === 'failed') throw new Error(`request ${id} failed`)
      await new Promise((res) => setTimeout(res, 50))
    }
  }
  const applied = performance.now()
  const objects = REQUESTS * PER_KIND * 3
  latencies.sort((a, b) => a - b)

  // The API tier's latency at 1,000 requests a second: alone (the track queues paused, as when
  // workers run on other hosts), then with the worker applying on the same two cores.
  let fixedRate: { apiAlone: FixedRate; withWorkers: FixedRate } | undefined
  if (mode === 'split') {
    // The services' own reading of the same variables, so the queues match theirs.
    const config = loadConfig(env)
    const connection = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null })
    const registry = new QueueRegistry(connection, config.QUEUE_PREFIX, config.TRACK_PARTITIONS)
    const track = queueNamesFor('track', config.TRACK_PARTITIONS).map((name) => registry.get(name))
    await Promise.all(track.map((q) => q.pause()))
    const apiAlone = await fixedRateLatency(apis, key, 1000, 10)
    await Promise.all(track.map((q) => q.resume()))
    await drained(track)
    const withWorkers = await fixedRateLatency(apis, key, 1000, 10)
    await registry.close()
    connection.disconnect()
    fixedRate = { apiAlone, withWorkers }
  }

  for (const s of services.reverse()) await stopService(s)
  await dropQueueKeys(env.QUEUE_PREFIX)
  console.log(
    JSON.stringify({
      mode,
      users: USERS,
      requests: REQUESTS,
      objects,
      acceptedPerSecond: Math.round(objects / ((accepted - started) / 1000)),
      appliedPerSecond: Math.round(objects / ((applied - started) / 1000)),
      apiP50Ms: Number(percentile(latencies, 50).toFixed(2)),
      apiP99Ms: Number(percentile(latencies, 99).toFixed(2)),
      fixedRate,
    }),
  )
}

async function drained(queues: Queue[]): Promise<void> {
  for (;;) {
    const counts = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'active')))
    if (counts.every((c) => c.waiting + c.active === 0)) return
    await new Promise((r) => setTimeout(r, 200))
  }
}

interface FixedRate {
  rps: number
  failures: number
  /** HTTP status or network error code to count. */
  failureReasons: Record<string, number>
  p50: number
  p99: number
}

// New connections and cold code paths stall the first seconds (measured: up to 2.7 s at first, steady after 4 s).
const WARM_UP_SECONDS = 5

/**
 * Small /users/track requests at a fixed rate (open loop: a slow answer does not slow the sender),
 * after an unrecorded warm-up at the same rate.
 */
async function fixedRateLatency(apis: string[], key: string, rps: number, seconds: number): Promise<FixedRate> {
  const latencies: number[] = []
  let failures = 0
  const failureReasons: Record<string, number> = {}
  const failed = (reason: string) => {
    failures++
    failureReasons[reason] = (failureReasons[reason] ?? 0) + 1
  }
  const inflight: Promise<void>[] = []
  const start = performance.now()
  const warmUp = rps * WARM_UP_SECONDS
  for (let i = 0; i < rps * (seconds + WARM_UP_SECONDS); i++) {
    const due = start + (i * 1000) / rps
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    inflight.push(
      (async () => {
        const t0 = performance.now()
        try {
          const r = await fetch(`${apis[i % apis.length]}/users/track`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ attributes: [{ external_id: `fr${i % 5000}`, visits: { inc: 1 } }] }),
          })
          await r.arrayBuffer()
          if (r.status !== 201 && i >= warmUp) failed(String(r.status))
        } catch (e) {
          if (i >= warmUp) failed(String((e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message))
        }
        if (i >= warmUp) latencies.push(performance.now() - t0)
      })(),
    )
  }
  await Promise.all(inflight)
  latencies.sort((a, b) => a - b)
  return { rps, failures, failureReasons, p50: Number(percentile(latencies, 50).toFixed(2)), p99: Number(percentile(latencies, 99).toFixed(2)) }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
