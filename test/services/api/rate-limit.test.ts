import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type HttpResult, type TestEnv } from '../../helpers/harness.js'
import { until } from '../../helpers/wait.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env.close()
})

/** An API-key endpoint in the default bucket: unknown request ids answer 404, still rate-limited. */
const requestStatus = (key: string) => env.call('GET', `/requests/${randomUUID()}`, { key })
const exportIds = (key: string) => env.call('POST', '/users/export/ids', { key, body: { external_ids: ['nobody'] } })

function rateHeaders(r: HttpResult) {
  return {
    limit: Number(r.headers.get('x-ratelimit-limit')),
    remaining: Number(r.headers.get('x-ratelimit-remaining')),
    reset: Number(r.headers.get('x-ratelimit-reset')),
  }
}

async function setRateLimits(workspaceId: string, body: unknown) {
  const r = await env.admin('PUT', `/admin/v1/workspaces/${workspaceId}/rate_limits`, body)
  expect(r.status).toBe(200)
}

/**
 * The first response under `limit`, which has used one request of it. A changed limit holds for
 * the next request (operator-changes.test.ts); the deadline only keeps a regression from hanging.
 */
function untilLimit(call: () => Promise<HttpResult>, limit: number, timeoutMs = 5000): Promise<HttpResult> {
  return until(`limit ${limit} in force`, call, (r) => rateHeaders(r).limit === limit, timeoutMs, 50)
}

describe('rate limits', () => {
  it('sends X-RateLimit-Limit, -Remaining and -Reset on every response, counting down', async () => {
    const ws = await env.workspace()
    const seen = []
    for (let i = 0; i < 3; i++) {
      const r = await requestStatus(ws.key)
      expect(r.status).toBe(404)
      seen.push(rateHeaders(r))
    }
    const nowSeconds = Date.now() / 1000
    expect(seen.map((h) => h.limit)).toEqual([250_000, 250_000, 250_000])
    expect(seen.map((h) => h.remaining)).toEqual([249_999, 249_998, 249_997])
    for (const h of seen) {
      // UTC epoch seconds, in the future and within the hour-long window of the default bucket.
      expect(Number.isInteger(h.reset)).toBe(true)
      expect(h.reset).toBeGreaterThan(nowSeconds)
      expect(h.reset).toBeLessThanOrEqual(Math.ceil(nowSeconds) + 3600)
    }
  })

  it('answers 429 with Retry-After and a JSON message past the limit', async () => {
    const ws = await env.workspace()
    await setRateLimits(ws.id, { default_per_hour: 3 })
    const first = await untilLimit(() => requestStatus(ws.key), 3)
    expect(rateHeaders(first).remaining).toBe(2)
    expect(rateHeaders(await requestStatus(ws.key)).remaining).toBe(1)
    expect(rateHeaders(await requestStatus(ws.key)).remaining).toBe(0)

    const limited = await requestStatus(ws.key)
    expect(limited.status).toBe(429)
    expect(limited.headers.get('content-type')).toMatch(/^application\/json/)
    expect(limited.body.message).toMatch(/rate limit/)
    const h = rateHeaders(limited)
    expect(h).toMatchObject({ limit: 3, remaining: 0 })
    const retryAfter = Number(limited.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(3600)
    // Retry-After and Reset describe the same moment.
    expect(Math.abs(h.reset - (Date.now() / 1000 + retryAfter))).toBeLessThanOrEqual(2)
  })

  it('counts each workspace on its own', async () => {
    const a = await env.workspace()
    const b = await env.workspace()
    await setRateLimits(a.id, { default_per_hour: 2 })
    await setRateLimits(b.id, { default_per_hour: 2 })
    await untilLimit(() => requestStatus(a.key), 2)
    expect((await requestStatus(a.key)).status).toBe(404)
    expect((await requestStatus(a.key)).status).toBe(429)

    const fromB = await untilLimit(() => requestStatus(b.key), 2)
    expect(fromB.status).toBe(404)
    expect(rateHeaders(fromB).remaining).toBe(1)
    expect((await requestStatus(a.key)).status).toBe(429)
  })

  it('applies a per-endpoint override to its bucket and leaves the default bucket alone', async () => {
    const ws = await env.workspace()
    const before = await exportIds(ws.key)
    expect(before.status).toBe(201)
    expect(rateHeaders(before)).toMatchObject({ limit: 250, remaining: 249 })

    await setRateLimits(ws.id, { endpoints: { '/users/export/ids': { limit: 2, window_seconds: 60 } } })
    const first = await untilLimit(() => exportIds(ws.key), 2)
    expect(first.status).toBe(201)
    const h = rateHeaders(first)
    expect(h.remaining).toBe(1)
    expect(h.reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60)
    expect((await exportIds(ws.key)).status).toBe(201)
    const limited = await exportIds(ws.key)
    expect(limited.status).toBe(429)
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(60)

    const other = await requestStatus(ws.key)
    expect(other.status).toBe(404)
    expect(rateHeaders(other).limit).toBe(250_000)
  })

  it('counts a path spelled with a trailing slash or in capitals in the same bucket', async () => {
    const ws = await env.workspace()
    const spellings = ['/users/export/ids', '/users/export/ids/', '/USERS/Export/IDS']
    const seen = []
    for (const p of spellings) {
      const r = await env.call('POST', p, { key: ws.key, body: { external_ids: ['nobody'] } })
      expect(r.status, p).toBe(201)
      seen.push(rateHeaders(r))
    }
    expect(seen.map((h) => [h.limit, h.remaining])).toEqual([
      [250, 249],
      [250, 248],
      [250, 247],
    ])
  })

  it('carries the headers on a refused permission too', async () => {
    const ws = await env.workspace(['email.status'])
    const r = await exportIds(ws.key)
    expect(r.status).toBe(403)
    expect(rateHeaders(r)).toMatchObject({ limit: 250, remaining: 249 })
  })
})
