import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '../../../services/api/app.js'
import { apiDepsFrom } from '../../../services/api/deps.js'
import { SESSION_COOKIE } from '../../../services/api/routes/queue-dashboard.js'
import { createLogger } from '../../../shared/logger.js'
import { startWorkers, type RunningWorker } from '../../../workers/registry.js'
import { request, startTestEnv, type HttpResult, type TestEnv } from '../../helpers/harness.js'
import { until } from '../../helpers/wait.js'

type LogLine = Record<string, any> & { msg: string }

/** A pino destination that keeps every line in memory. */
function memoryLog() {
  const raw: string[] = []
  return {
    raw,
    write: (line: string) => void raw.push(line),
    lines: (): LogLine[] => raw.map((l) => JSON.parse(l)),
  }
}

describe('logs', () => {
  let env: TestEnv
  let server: Server
  let workers: RunningWorker[] = []
  let baseUrl: string
  const log = memoryLog()
  const secrets: string[] = []
  const call = (method: string, p: string, opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<HttpResult> =>
    request(baseUrl, method, p, opts)

  beforeAll(async () => {
    env = await startTestEnv()
    // The same service as the harness's, but logging at the production default level into memory.
    const logger = createLogger('info', log)
    const app = createApp({ ...apiDepsFrom(env.ctx, env.metrics, env.adminToken), logger })
    server = app.listen(0, '127.0.0.1')
    await new Promise<void>((r) => server.once('listening', () => r()))
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    workers = await startWorkers({ ...env.ctx, logger }, ['track'], env.metrics)
    secrets.push(env.adminToken)
  })

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.close(true)))
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()))
    await env?.close()
  })

  it('carries the request id of a write from the API line to the job line', async () => {
    const ws = await env.workspace()
    secrets.push(ws.key)
    const res = await call('POST', '/users/track', {
      token: ws.key,
      body: { attributes: [{ external_id: 'log-user', first_name: 'body-marker-Zelda', email: 'zelda@example.com' }] },
    })
    expect(res.status).toBe(201)
    const requestId = res.headers.get('x-request-id')!
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/)

    const apiLine = (await until('the API line', () => log.lines().find((l) => l.req?.path === '/users/track'), Boolean))!
    expect(apiLine).toMatchObject({ requestId, level: 30, res: { statusCode: 201 }, req: { method: 'POST' } })
    const jobLine = (await until('the job line', () => log.lines().find((l) => l.msg === 'job finished' && l.requestId === requestId), Boolean))!
    expect(jobLine.queue).toMatch(/^track-\d+$/)
    expect(jobLine.outcome).toBe('ok')
    expect(log.raw.join('')).not.toContain('body-marker-Zelda')
  })

  it('gives requests that queue nothing a generated id of their own', async () => {
    await call('GET', '/healthz')
    const first = await call('GET', '/no/such/endpoint')
    const second = await call('GET', '/no/such/endpoint')
    expect([first.status, second.status]).toEqual([404, 404])
    const lines = await until('two 404 lines', () => log.lines().filter((l) => l.req?.path === '/no/such/endpoint'), (l) => l.length === 2)
    expect(lines[0].requestId).toMatch(/^[0-9a-f-]{36}$/)
    expect(lines[0].requestId).not.toBe(lines[1].requestId)
    // Probes log at debug, below the default level.
    expect(log.lines().some((l) => l.req?.path === '/healthz')).toBe(false)
  })

  it('logs the address a request came from, never one it claims in X-Forwarded-For', async () => {
    const r = await call('GET', '/no/such/forwarded', { headers: { 'x-forwarded-for': '203.0.113.66, 10.0.0.1', 'x-real-ip': '203.0.113.67' } })
    expect(r.status).toBe(404)
    const line = (await until('the spoofed line', () => log.lines().find((l) => l.req?.path === '/no/such/forwarded'), Boolean))!
    expect(line.req.remoteAddress).toMatch(/^(::ffff:)?127\.0\.0\.1$/)
    expect(JSON.stringify(line)).not.toMatch(/203\.0\.113\.6[67]/)
  })

  it('writes no API key, admin token, SCIM token, session cookie or signed-link signature', async () => {
    const ws = await env.workspace()
    secrets.push(ws.key)
    expect((await call('POST', '/users/export/ids', { token: ws.key, body: { external_ids: ['log-user'] } })).status).toBe(201)
    expect((await call('POST', '/users/track', { token: `${ws.key}x`, body: { attributes: [] } })).status).toBe(401)
    secrets.push(`${ws.key}x`)

    const scim = await call('POST', '/admin/v1/scim_tokens', { token: env.adminToken, body: { request_origin: 'logs.example' } })
    expect(scim.status).toBe(201)
    secrets.push(scim.body.token)
    expect((await call('GET', '/scim/v2/Users', { token: scim.body.token, headers: { 'x-request-origin': 'logs.example' } })).status).toBe(200)

    const dashboard = await fetch(`${baseUrl}/admin/queues?token=${encodeURIComponent(env.adminToken)}`, { redirect: 'manual' })
    expect(dashboard.status).toBe(303)
    const cookie = dashboard.headers.get('set-cookie')!.split(';')[0]
    expect(cookie.startsWith(`${SESSION_COOKIE}=`)).toBe(true)
    secrets.push(cookie.slice(SESSION_COOKIE.length + 1))
    expect((await call('GET', '/admin/queues/api/queues', { headers: { cookie } })).status).toBe(200)

    expect((await call('GET', '/exports/some-export/download?signature=signature-secret-value')).status).toBe(403)
    secrets.push('signature-secret-value')
    expect((await call('GET', '/metrics', { token: env.adminToken })).status).toBe(200)

    await until('the lines of every request above', () => log.lines().filter((l) => l.req?.path === '/exports/some-export/download'), (l) => l.length === 1)
    const written = log.raw.join('')
    expect(written.length).toBeGreaterThan(0)
    for (const secret of secrets) expect(written, 'a secret reached the log').not.toContain(secret)
    // Not even the random part of a key (keys carry a readable prefix).
    for (const key of secrets.filter((s) => /^uds_[a-z]+_/.test(s))) expect(written).not.toContain(key.replace(/^uds_[a-z]+_/, ''))
    const download = log.lines().find((l) => l.req?.path === '/exports/some-export/download')!
    expect(download.req.query).toEqual(['signature'])
  })
})
