import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { caller, expectStatus, waitDone, type Call } from '../helpers/route-tour.js'
import { startScaled, type ServiceProcesses } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'

/**
 * The README's scaled mode: two API processes (`npm run start:api`) beside one worker process
 * (`npm run start:worker`) holding the embedded ClickHouse. Every API process answers alike.
 */
let svc: ServiceProcesses
let apis: Call[]
let key: string
let ws: string

beforeAll(async () => {
  svc = await startScaled(2)
  apis = svc.apis.map(caller)
  key = svc.credentials.api_key
  ws = svc.credentials.workspace_id
}, 120_000)

afterAll(async () => {
  await svc?.stop()
})

describe('two API processes beside one worker process', () => {
  it('apply through one and read back, segment sizes included, through the other', async () => {
    const [a, b] = apis
    const seg = expectStatus(await a('POST', `/admin/v1/workspaces/${ws}/segments`, { token: svc.adminToken, body: { name: 'all', filter: { all: [] } } }), 201)
    const track = expectStatus(
      await b('POST', '/users/track', { token: key, body: { attributes: Array.from({ length: 5 }, (_, i) => ({ external_id: `s${i}`, plan: 'gold' })) } }),
      201,
    )
    await waitDone(a, key, track)
    for (const api of apis) {
      const size = expectStatus(await api('GET', `/admin/v1/workspaces/${ws}/segments/${seg.body.segment_id}`, { token: svc.adminToken }), 200)
      expect(size.body.size).toBe(5)
      const read = expectStatus(await api('POST', '/users/export/ids', { token: key, body: { external_ids: ['s0', 's4'] } }), 201)
      expect(read.body.users).toHaveLength(2)
      expect(expectStatus(await api('GET', '/readyz'), 200).body).toEqual({ status: 'ready' })
      const ready = expectStatus(await api('GET', '/readyz', { token: svc.adminToken }), 200)
      expect(ready.body.checks.clickhouse).toMatch(/^ok \(embedded engine held by worker process \d+/)
    }
  })

  it('hold an operator change made through one for the very next request to the other', async () => {
    const [a, b] = apis
    const k = expectStatus(await a('POST', `/admin/v1/workspaces/${ws}/api_keys`, { token: svc.adminToken, body: { name: 'k', permissions: ['users.export.ids'] } }), 201)
    expectStatus(await b('POST', '/users/export/ids', { token: k.body.key, body: { external_ids: ['s0'] } }), 201)
    expectStatus(await a('DELETE', `/admin/v1/api_keys/${k.body.id}`, { token: svc.adminToken }), 204)
    expectStatus(await b('POST', '/users/export/ids', { token: k.body.key, body: { external_ids: ['s0'] } }), 401)
  })

  it('answer 503 with Retry-After within seconds, naming what is missing, once the worker is gone', async () => {
    const seg = expectStatus(await apis[0]('POST', `/admin/v1/workspaces/${ws}/segments`, { token: svc.adminToken, body: { name: 'gold', filter: { custom_attribute: 'plan', op: 'eq', value: 'gold' } } }), 201)
    svc.signal('worker', 'SIGKILL')
    for (const api of apis) {
      const started = Date.now()
      const r = await until(
        'the size to be refused',
        () => api('GET', `/admin/v1/workspaces/${ws}/segments/${seg.body.segment_id}`, { token: svc.adminToken }),
        (res) => res.status === 503,
        15_000,
        100,
      )
      expect(Date.now() - started).toBeLessThan(10_000)
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/)
      expect(r.body.message).toMatch(/^ClickHouse is unavailable: (no worker process holds the embedded engine|the worker process holding)/)
      expect(expectStatus(await api('GET', '/readyz'), 503).body).toEqual({ status: 'not ready' })
      const ready = expectStatus(await api('GET', '/readyz', { token: svc.adminToken }), 503)
      expect(ready.body.checks.clickhouse).toMatch(/^ClickHouse is unavailable/)
      expect(ready.body.checks.postgres).toBe('ok')
    }
  })
})
