import { randomUUID } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startTestEnv, type HttpResult, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env.close()
})

const TRACK_BODY = { attributes: [{ external_id: 'auth-user', first_name: 'Ada' }] }

/** Every error answer is JSON with a message: never an HTML page. */
function expectJsonError(r: HttpResult, status: number, message: RegExp) {
  expect(r.status, r.text).toBe(status)
  expect(r.headers.get('content-type')).toMatch(/^application\/json/)
  expect(r.body.message).toMatch(message)
}

describe('API keys', () => {
  it('answers 401 JSON for a missing, malformed or unknown key', async () => {
    const path = `/requests/${randomUUID()}`
    expectJsonError(await env.call('GET', path), 401, /missing API key/)
    expectJsonError(await request(env.baseUrl, 'GET', path, { headers: { authorization: 'Basic dXNlcjpwYXNz' } }), 401, /missing API key/)
    expectJsonError(await env.call('GET', path, { key: 'uds_key_not-a-real-key' }), 401, /invalid API key/)
    expectJsonError(await env.call('POST', '/users/track', { key: 'uds_key_not-a-real-key', body: TRACK_BODY }), 401, /invalid API key/)
  })

  it('stops accepting a revoked key at once', async () => {
    const ws = await env.workspace()
    const keys = await env.ctx.pg.query('SELECT id FROM api_keys WHERE workspace_id = $1', [ws.id])
    const path = `/requests/${randomUUID()}`
    expect((await env.call('GET', path, { key: ws.key })).status).toBe(404)

    expect((await env.admin('DELETE', `/admin/v1/api_keys/${keys.rows[0].id}`)).status).toBe(204)
    expectJsonError(await env.call('GET', path, { key: ws.key }), 401, /invalid API key/)
  })

  it('refuses a key without the endpoint permission with 403 JSON naming the permission, queuing nothing', async () => {
    const ws = await env.workspace(['email.status', 'users.export.ids'])
    const r = await env.call('POST', '/users/track', { key: ws.key, body: TRACK_BODY })
    expectJsonError(r, 403, /users\.track/)
    expect(r.headers.get('x-request-id')).toBeNull()
    const queued = await Promise.all(env.ctx.queues.allNames().map((q) => env.ctx.queues.get(q).count()))
    expect(queued.reduce((a, b) => a + b, 0)).toBe(0)

    // The same key still works where it holds the permission.
    expect((await env.call('POST', '/users/export/ids', { key: ws.key, body: { external_ids: ['x'] } })).status).toBe(201)
  })

  it("never lets a key see another workspace's request", async () => {
    const a = await env.workspace()
    const b = await env.workspace()
    const tracked = await env.call('POST', '/users/track', { key: a.key, body: TRACK_BODY })
    expect(tracked.status, tracked.text).toBe(201)
    const requestId = tracked.headers.get('x-request-id')!

    const own = await env.call('GET', `/requests/${requestId}`, { key: a.key })
    expect(own.status).toBe(200)
    expect(own.body).toMatchObject({ request_id: requestId, status: 'queued' })
    expectJsonError(await env.call('GET', `/requests/${requestId}`, { key: b.key }), 404, /unknown request id/)
  })
})

describe('malformed requests', () => {
  let key: string
  beforeAll(async () => {
    key = (await env.workspace()).key
  })

  it('answers 404 JSON for unknown paths', async () => {
    expectJsonError(await env.call('GET', '/no/such/endpoint', { key }), 404, /no such endpoint: GET \/no\/such\/endpoint/)
    expectJsonError(await env.call('POST', '/users/trak', { key, body: TRACK_BODY }), 404, /no such endpoint/)
  })

  it('answers 400 JSON for a malformed JSON body', async () => {
    const r = await request(env.baseUrl, 'POST', '/users/track', {
      token: key,
      raw: '{"attributes": [{"external_id": ',
      headers: { 'content-type': 'application/json' },
    })
    expectJsonError(r, 400, /malformed JSON/)
  })

  it('answers 415 JSON for a body that is not JSON', async () => {
    const form = await request(env.baseUrl, 'POST', '/users/track', {
      token: key,
      raw: 'external_id=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expectJsonError(form, 415, /application\/json/)
    const text = await request(env.baseUrl, 'POST', '/users/track', { token: key, raw: JSON.stringify(TRACK_BODY) })
    expectJsonError(text, 415, /application\/json/)
  })

  it('answers 413 JSON for a body over 4 MB', async () => {
    const big = JSON.stringify({ attributes: [{ external_id: 'big', blob: 'x'.repeat(4 * 1024 * 1024) }] })
    const r = await request(env.baseUrl, 'POST', '/users/track', { token: key, raw: big, headers: { 'content-type': 'application/json' } })
    expectJsonError(r, 413, /larger than the limit/)
  })

  it('counts a gzipped body by its inflated size: a 10 MB bomb is a 413, queuing nothing', async () => {
    const bomb = gzipSync(Buffer.from(JSON.stringify({ attributes: [{ external_id: 'bomb', blob: ' '.repeat(10 * 1024 * 1024) }] })))
    expect(bomb.length).toBeLessThan(64 * 1024)
    const before = (await env.ctx.tracker.backlog()).all
    const res = await fetch(`${env.baseUrl}/users/track`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: bomb,
    })
    expect(res.status).toBe(413)
    expect(((await res.json()) as { message: string }).message).toMatch(/larger than the limit of 4194304 bytes/)
    expect((await env.ctx.tracker.backlog()).all).toBe(before)
  })

  it('refuses JSON nested 10,000 levels deep with a 400 naming the depth, before any schema', async () => {
    const deep = `{"attributes": [${'['.repeat(10_000)}${']'.repeat(10_000)}]}`
    const r = await request(env.baseUrl, 'POST', '/users/track', { token: key, raw: deep, headers: { 'content-type': 'application/json' } })
    expect(r.status).toBe(400)
    expect(r.text).toMatch(/nested deeper than 64 levels/)
    expect(r.text).not.toMatch(/call stack|RangeError/)
  })
})
