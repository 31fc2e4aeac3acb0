import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { QueueNames } from '../../../shared/queue/queues.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { sleep, until } from '../../helpers/wait.js'

const PARTITIONS = 4
const PER_WORKSPACE = 300
const ALL = 500

let env: TestEnv
let a: { id: string; key: string }
let b: { id: string; key: string }
let c: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ env: { TRACK_BACKLOG_MAX_OBJECTS: String(ALL), TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE: String(PER_WORKSPACE) } })
  ;[a, b, c] = await Promise.all([env.workspace(), env.workspace(), env.workspace()])
})
afterAll(async () => {
  await env.close()
})

/** A request of `attributes` + `events` + `purchases` objects, each naming its own user. */
function body(prefix: string, attributes: number, events: number, purchases: number) {
  const time = new Date().toISOString()
  return {
    attributes: Array.from({ length: attributes }, (_, i) => ({ external_id: `${prefix}-${i}`, plan: 'gold' })),
    events: Array.from({ length: events }, (_, i) => ({ external_id: `${prefix}-${i}`, name: 'opened', time })),
    purchases: Array.from({ length: purchases }, (_, i) => ({ external_id: `${prefix}-${i}`, product_id: 'sku', currency: 'USD', price: 1, time })),
  }
}

/** The backlog counters, read back from Redis. */
const counters = () => env.ctx.redis.hgetall(`${env.config.QUEUE_PREFIX}:backlog`)

/** Jobs not yet applied on every track partition, read back from the queues. */
async function queuedTrackJobs(): Promise<number> {
  let n = 0
  for (let p = 0; p < PARTITIONS; p++) {
    const counts = await env.ctx.queues.get(QueueNames.track(p)).getJobCounts('waiting', 'active', 'delayed', 'prioritized')
    n += Object.values(counts).reduce((x, y) => x + y, 0)
  }
  return n
}

/** Jobs of one request present in any track partition. */
async function jobsOfRequest(requestId: string): Promise<number> {
  let n = 0
  for (let p = 0; p < PARTITIONS; p++) {
    for (let i = 0; i < PARTITIONS; i++) if (await env.ctx.queues.get(QueueNames.track(p)).getJob(`${requestId}_${i}`)) n++
  }
  return n
}

/** Sample values of a metric from GET /metrics, by their label text. */
async function scrape(name: string): Promise<Map<string, number>> {
  const r = await env.call('GET', '/metrics', { key: env.adminToken })
  expect(r.status).toBe(200)
  const out = new Map<string, number>()
  for (const line of r.text.split('\n')) {
    const m = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line)
    if (m) out.set(m[1] ?? '', Number(m[2]))
  }
  return out
}

describe('bounded track backlog', () => {
  const accepted: { key: string; id: string }[] = []
  let firstAcceptedAt = 0
  let refusedBody: unknown

  it('answers 429 with Retry-After and the rate-limit headers past the workspace bound, enqueuing nothing', async () => {
    firstAcceptedAt = Date.now()
    const first = await env.call('POST', '/users/track', { key: a.key, body: body('a1', 75, 75, 50) })
    expect(first.status).toBe(201)
    accepted.push({ key: a.key, id: first.headers.get('x-request-id')! })
    expect(await counters()).toEqual({ all: '200', [`ws:${a.id}`]: '200' })
    const queuedBefore = await queuedTrackJobs()
    expect(queuedBefore).toBeGreaterThan(0)

    refusedBody = body('a2', 75, 75, 0)
    const refused = await env.call('POST', '/users/track', { key: a.key, body: refusedBody, headers: { 'Idempotency-Key': 'a2-once' } })
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(refused.headers.get('x-ratelimit-limit')).toBe('3000')
    expect(Number(refused.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0)
    expect(Number(refused.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000 - 1)
    expect(refused.body).toMatchObject({ reason: 'backlog_full', scope: 'workspace' })
    expect(refused.body.message).toMatch(/backlog full/)

    // Nothing enqueued, nothing recorded, nothing counted.
    const refusedId = refused.headers.get('x-request-id')!
    expect(await queuedTrackJobs()).toBe(queuedBefore)
    expect(await jobsOfRequest(refusedId)).toBe(0)
    expect((await env.call('GET', `/requests/${refusedId}`, { key: a.key })).status).toBe(404)
    expect(await counters()).toEqual({ all: '200', [`ws:${a.id}`]: '200' })
  })

  it('answers 429 past the bound in all, while other producers count without being refused', async () => {
    const second = await env.call('POST', '/users/track', { key: b.key, body: body('b1', 75, 75, 50) })
    expect(second.status).toBe(201)
    accepted.push({ key: b.key, id: second.headers.get('x-request-id')! })

    const refused = await env.call('POST', '/users/track', { key: c.key, body: body('c1', 75, 75, 0) })
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ reason: 'backlog_full', scope: 'all' })
    expect(refused.headers.get('retry-after')).not.toBeNull()

    const email = await env.call('POST', '/email/status', { key: c.key, body: { email: 'c@example.com', subscription_state: 'subscribed' } })
    expect(email.status).toBe(201)
    accepted.push({ key: c.key, id: email.headers.get('x-request-id')! })
    expect(await counters()).toEqual({ all: '401', [`ws:${a.id}`]: '200', [`ws:${b.id}`]: '200', [`ws:${c.id}`]: '1' })
  })

  it('shows the backlog and the lag per partition in the metrics and on the queue dashboard', async () => {
    await sleep(300)
    expect(await scrape('uds_track_backlog_objects')).toEqual(new Map([['', 401]]))
    expect(await scrape('uds_track_backlog_workspace_max_objects')).toEqual(new Map([['', 200]]))
    expect(await scrape('uds_track_backlog_workspaces')).toEqual(new Map([['', 3]]))
    const upper = (Date.now() - firstAcceptedAt) / 1000 + 0.1
    const lag = await scrape('uds_queue_lag_seconds')
    expect(lag.size).toBe(PARTITIONS)
    for (let p = 0; p < PARTITIONS; p++) {
      const waiting = (await env.ctx.queues.get(QueueNames.track(p)).getJobCounts('waiting')).waiting
      const seconds = lag.get(`{queue="track",partition="${p}"}`)!
      if (waiting === 0) expect(seconds).toBe(0)
      else expect(seconds).toBeGreaterThanOrEqual(0.3)
      expect(seconds).toBeLessThanOrEqual(upper)
    }
    expect([...lag.values()].some((s) => s > 0)).toBe(true)

    const page = await env.call('GET', '/admin/queues/backlog', { key: env.adminToken })
    expect(page.status).toBe(200)
    expect(page.body.track_backlog).toMatchObject({ objects: 401, limit: ALL, per_workspace_limit: PER_WORKSPACE })
    expect(page.body.track_backlog.workspaces).toHaveLength(3)
    expect(page.body.track_backlog.workspaces[2]).toEqual({ workspace_id: c.id, objects: 1 })
    expect(new Set(page.body.track_backlog.workspaces.slice(0, 2).map((w: { workspace_id: string }) => w.workspace_id))).toEqual(new Set([a.id, b.id]))
    expect(Object.keys(page.body.lag_seconds).sort()).toEqual(['track-0', 'track-1', 'track-2', 'track-3'])
    expect(Math.max(...(Object.values(page.body.lag_seconds) as number[]))).toBeGreaterThanOrEqual(0.3)
    expect((await env.call('GET', '/admin/queues/backlog')).status).toBe(401)

    const board = await env.call('GET', '/admin/queues/api/queues', { key: env.adminToken })
    expect(board.status).toBe(200)
    const track0 = board.body.queues.find((q: { name: string }) => q.name === 'track-0')
    expect(track0.description).toContain('track backlog 401 of 500 objects')
    expect(track0.description).toMatch(/lag \d+\.\d s/)
  })

  it('drains to zero once the workers apply, a job reported twice changes nothing, and refused work is accepted again', async () => {
    await env.startWorkers(['track'])
    for (const r of accepted) expect((await env.waitForRequest(r.key, r.id)).status).toBe('done')
    await until('the backlog to drain', counters, (h) => Object.keys(h).length === 0)
    expect(await scrape('uds_track_backlog_objects')).toEqual(new Map([['', 0]]))
    expect([...(await scrape('uds_queue_lag_seconds')).values()]).toEqual([0, 0, 0, 0])

    // A replay after a crash reports the same jobs again: the counters stay at zero.
    const replay = accepted.flatMap((r) => Array.from({ length: PARTITIONS }, (_, i) => ({ requestId: r.id, jobKey: `${r.id}_${i}`, status: 'done' as const })))
    await env.ctx.tracker.reportJobs(replay)
    await env.ctx.tracker.markJobDone(accepted[0].id, `${accepted[0].id}_0`)
    expect(await counters()).toEqual({})
    expect(await env.waitForRequest(a.key, accepted[0].id)).toEqual({ request_id: accepted[0].id, status: 'done' })

    // The refused request, sent again with its Idempotency-Key: the 429 was not stored, so it goes through.
    const again = await env.call('POST', '/users/track', { key: a.key, body: refusedBody, headers: { 'Idempotency-Key': 'a2-once' } })
    expect(again.status).toBe(201)
    expect(again.headers.get('idempotent-replayed')).toBeNull()
    expect((await env.waitForRequest(a.key, again.headers.get('x-request-id')!)).status).toBe('done')
    const users = await env.readUsers(a.key, { external_ids: ['a2-0'] })
    expect(users.users[0]).toMatchObject({ external_id: 'a2-0', custom_attributes: { plan: 'gold' }, custom_events: [{ name: 'opened', count: 1 }] })
    await until('the backlog to drain again', counters, (h) => Object.keys(h).length === 0)
  })
})
