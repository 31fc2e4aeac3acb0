import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

// No workers: whatever a request queued stays in Redis, so the tests can count it.
let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env.close()
})

const track = (key: string, idempotencyKey: string, externalId = 'idem-user') =>
  env.call('POST', '/users/track', {
    key,
    body: { attributes: [{ external_id: externalId, plan: 'gold' }], events: [{ external_id: externalId, name: 'login', time: new Date().toISOString() }] },
    headers: { 'Idempotency-Key': idempotencyKey },
  })

/** Request ids known to the request tracker, across all workspaces of this test env. */
async function trackedRequestIds(): Promise<string[]> {
  const keys = await env.ctx.redis.keys(`${env.config.QUEUE_PREFIX}:request:*`)
  return keys.map((k) => k.split(':request:')[1]).filter((rest) => !rest.includes(':'))
}

async function queuedJobIds(): Promise<string[]> {
  const jobs = await Promise.all(env.ctx.queues.allNames().map((q) => env.ctx.queues.get(q).getJobs(['waiting', 'delayed', 'active'])))
  return jobs.flat().map((j) => j.id!)
}

describe('Idempotency-Key', () => {
  it('replays the first response for a repeat and applies the change once', async () => {
    const ws = await env.workspace()
    const idempotencyKey = randomUUID()
    const before = { requests: await trackedRequestIds(), jobs: await queuedJobIds() }

    const first = await track(ws.key, idempotencyKey)
    expect(first.status, first.text).toBe(201)
    expect(first.headers.get('idempotent-replayed')).toBeNull()
    const requestId = first.headers.get('x-request-id')
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/)
    const after = { requests: await trackedRequestIds(), jobs: await queuedJobIds() }

    const second = await track(ws.key, idempotencyKey)
    expect(second.status).toBe(first.status)
    expect(second.text).toBe(first.text)
    expect(second.headers.get('x-request-id')).toBe(requestId)
    expect(second.headers.get('idempotent-replayed')).toBe('true')

    // The repeat created no request and queued no job.
    expect(after.requests.filter((id) => !before.requests.includes(id))).toEqual([requestId])
    expect(after.jobs.length).toBeGreaterThan(before.jobs.length)
    expect((await trackedRequestIds()).sort()).toEqual(after.requests.sort())
    expect((await queuedJobIds()).sort()).toEqual(after.jobs.sort())
  })

  it('replays the first response even when the repeat carries a different body', async () => {
    const ws = await env.workspace()
    const idempotencyKey = randomUUID()
    const first = await track(ws.key, idempotencyKey, 'first-user')
    const count = (await trackedRequestIds()).length
    const repeat = await track(ws.key, idempotencyKey, 'second-user')
    expect(repeat.headers.get('x-request-id')).toBe(first.headers.get('x-request-id'))
    expect(repeat.text).toBe(first.text)
    expect((await trackedRequestIds()).length).toBe(count)
  })

  it('treats each key, and each workspace, on its own', async () => {
    const a = await env.workspace()
    const b = await env.workspace()
    const shared = randomUUID()
    const fromA = await track(a.key, shared)
    const fromB = await track(b.key, shared)
    const otherKey = await track(a.key, randomUUID())
    for (const r of [fromA, fromB, otherKey]) {
      expect(r.status).toBe(201)
      expect(r.headers.get('idempotent-replayed')).toBeNull()
    }
    const ids = [fromA, fromB, otherKey].map((r) => r.headers.get('x-request-id'))
    expect(new Set(ids).size).toBe(3)
    expect((await env.call('GET', `/requests/${ids[1]}`, { key: b.key })).body.status).toBe('queued')
  })

  it('applies two simultaneous requests with the same key once', async () => {
    const ws = await env.workspace()
    const idempotencyKey = randomUUID()
    const before = await trackedRequestIds()
    const both = await Promise.all([track(ws.key, idempotencyKey), track(ws.key, idempotencyKey)])
    const created = (await trackedRequestIds()).filter((id) => !before.includes(id))
    expect(created).toHaveLength(1)
    // The loser either waited for nothing (409, still running) or got the replay.
    const statuses = both.map((r) => r.status).sort()
    expect([
      [201, 201],
      [201, 409],
    ]).toContainEqual(statuses)
    for (const r of both.filter((x) => x.status === 201)) expect(r.headers.get('x-request-id')).toBe(created[0])
  })

  it('refuses an Idempotency-Key longer than 255 characters', async () => {
    const ws = await env.workspace()
    const r = await track(ws.key, 'k'.repeat(256))
    expect(r.status).toBe(400)
    expect(r.body.message).toMatch(/Idempotency-Key/)
  })
})
