import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SESSION_COOKIE } from '../../../services/api/routes/queue-dashboard.js'
import { request, startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

describe('GET /readyz', () => {
  it('answers the status alone without the admin token, and every check with it', async () => {
    const ws = await env.workspace()
    for (const token of [undefined, 'wrong-token', ws.key]) {
      const r = await request(env.baseUrl, 'GET', '/readyz', { token })
      expect(r.status, String(token)).toBe(200)
      expect(r.body, String(token)).toEqual({ status: 'ready' })
    }
    const full = await request(env.baseUrl, 'GET', '/readyz', { token: env.adminToken })
    expect(full.status).toBe(200)
    expect(full.body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', clickhouse: 'ok (embedded engine in this process)' } })
  })
})

/** A session cookie of the queue dashboard, as a browser gets it from `?token=`. */
async function sessionCookie(): Promise<string> {
  const res = await fetch(`${env.baseUrl}/admin/queues?token=${encodeURIComponent(env.adminToken)}`, { redirect: 'manual' })
  expect(res.status).toBe(303)
  const cookie = res.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`))
  return cookie!.split(';')[0]
}

describe('queue dashboard', () => {
  it('sends its pages with the security headers', async () => {
    for (const path of ['/admin/queues', '/admin/queues/queue/export']) {
      const r = await fetch(`${env.baseUrl}${path}`, { headers: { authorization: `Bearer ${env.adminToken}` } })
      expect(r.status, path).toBe(200)
      expect(r.headers.get('content-type')).toMatch(/^text\/html/)
      expect(r.headers.get('x-frame-options')).toBe('DENY')
      expect(r.headers.get('x-content-type-options')).toBe('nosniff')
      expect(r.headers.get('referrer-policy')).toBe('same-origin')
      const csp = r.headers.get('content-security-policy')!
      for (const directive of ["default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'self'", "connect-src 'self'"]) {
        expect(csp.split('; '), directive).toContain(directive)
      }
    }
  })

  it("accepts a write only from PUBLIC_URL's origin; a bearer client without Origin or Referer passes", async () => {
    const cookie = await sessionCookie()
    const queue = env.ctx.queues.get('callback')
    const pause = (headers: Record<string, string>) => fetch(`${env.baseUrl}/admin/queues/api/queues/callback/pause`, { method: 'PUT', headers })
    const resume = (headers: Record<string, string>) => fetch(`${env.baseUrl}/admin/queues/api/queues/callback/resume`, { method: 'PUT', headers })
    const bearer = { authorization: `Bearer ${env.adminToken}` }

    const refused: [Record<string, string>, RegExp][] = [
      [{ cookie, origin: 'http://evil.example' }, /this request has Origin http:\/\/evil\.example$/],
      [{ cookie, origin: 'null' }, /this request has Origin null$/],
      [{ cookie, referer: 'http://evil.example/page' }, /this request has a Referer from http:\/\/evil\.example$/],
      // A cookie is what a browser attaches on its own: it needs the origin's word.
      [{ cookie }, /this request has neither Origin nor Referer$/],
      [{ ...bearer, origin: 'http://evil.example' }, /this request has Origin http:\/\/evil\.example$/],
    ]
    for (const [headers, message] of refused) {
      const r = await pause(headers)
      expect(r.status, JSON.stringify(headers)).toBe(403)
      const body = (await r.json()) as { message: string }
      expect(body.message).toMatch(new RegExp(`^a PUT here must come from ${env.baseUrl.replace(/[.]/g, '\\.')} \\(PUBLIC_URL\\)`))
      expect(body.message).toMatch(message)
      expect(await queue.isPaused()).toBe(false)
    }

    expect((await pause({ cookie, origin: env.baseUrl })).status).toBe(200)
    expect(await queue.isPaused()).toBe(true)
    expect((await resume({ cookie, referer: `${env.baseUrl}/admin/queues/queue/callback` })).status).toBe(200)
    expect(await queue.isPaused()).toBe(false)
    expect((await pause(bearer)).status).toBe(200)
    expect(await queue.isPaused()).toBe(true)
    expect((await resume(bearer)).status).toBe(200)
    expect(await queue.isPaused()).toBe(false)
    // Reads need no origin.
    expect((await fetch(`${env.baseUrl}/admin/queues/api/queues`, { headers: { cookie } })).status).toBe(200)
  })
})

describe('API docs page', () => {
  it('gets the same headers, its inline script allowed by its hash alone', async () => {
    const r = await fetch(`${env.baseUrl}/docs`)
    expect(r.status).toBe(200)
    expect(r.headers.get('x-frame-options')).toBe('DENY')
    expect(r.headers.get('x-content-type-options')).toBe('nosniff')
    const csp = r.headers.get('content-security-policy')!.split('; ')
    expect(csp).toContainEqual(expect.stringMatching(/^script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'$/))
    expect(csp).toContain(`connect-src 'self' ${env.baseUrl}`)
    const asset = await fetch(`${env.baseUrl}/docs/assets/swagger-ui-bundle.js`)
    expect(asset.status).toBe(200)
    expect(asset.headers.get('x-content-type-options')).toBe('nosniff')
  })
})
