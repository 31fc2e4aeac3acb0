import { expect } from 'vitest'
import { apiOperations } from '../../services/api/app.js'
import { openApiPath } from '../../services/api/openapi.js'
import { request, type HttpResult } from './harness.js'
import { until } from './wait.js'

/** Calls one API process as a client would; `token` is sent as a bearer token. */
export type Call = (method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string }) => Promise<HttpResult>

export function caller(baseUrl: string): Call {
  return (method, path, opts = {}) => request(baseUrl, method, path, opts)
}

/** Asserts the status, showing the answer when it differs. */
export function expectStatus(r: HttpResult, status: number): HttpResult {
  expect(r.status, `${r.status} ${r.text.slice(0, 300)}`).toBe(status)
  return r
}

/** Polls GET /requests/{id} until done; fails if it failed. */
export async function waitDone(call: Call, key: string, r: HttpResult): Promise<void> {
  const id = r.headers.get('x-request-id')
  expect(id, 'X-Request-Id').toBeTruthy()
  const progress = await until(
    `request ${id} to finish`,
    () => call('GET', `/requests/${id}`, { token: key }),
    (p) => p.body?.status === 'done' || p.body?.status === 'failed',
    60_000,
    50,
  )
  expect(progress.body).toMatchObject({ status: 'done' })
}

interface Served {
  route: string
  method: string
  status: number
}

/** Every request an API process served, by route pattern and status, from its own `/metrics`. */
export async function servedRoutes(call: Call, adminToken: string): Promise<Served[]> {
  const r = expectStatus(await call('GET', '/metrics', { token: adminToken }), 200)
  const served: Served[] = []
  for (const line of r.text.split('\n')) {
    if (!line.startsWith('uds_http_requests_total{')) continue
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]))
    if (Number(line.split(' ').pop()) > 0) served.push({ route: labels.route, method: labels.method, status: Number(labels.status) })
  }
  return served
}

/**
 * The routes a tour left out: every documented operation (the OpenAPI test holds them equal to
 * the mounted routes) must have answered at least one success (2xx or 3xx) and, unless anyone may
 * call it, at least one refusal (4xx). What the API processes served is read from their metrics.
 */
export function untouchedRoutes(served: Served[]): string[] {
  const missing: string[] = []
  for (const op of apiOperations()) {
    const mine = served.filter((s) => s.method === op.method.toUpperCase() && openApiPath(s.route) === openApiPath(op.path))
    const name = `${op.method.toUpperCase()} ${op.path}`
    if (!mine.some((s) => s.status < 400)) missing.push(`${name}: no success`)
    if (op.auth !== 'none' && !mine.some((s) => s.status >= 400 && s.status < 500)) missing.push(`${name}: no refusal`)
  }
  return missing
}
