import { readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { rm } from 'node:fs/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMetrics } from '../../../shared/metrics.js'
import { request, startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { freePort } from '../../helpers/ports.js'
import { until } from '../../helpers/wait.js'
import { exited, spawnWorkerProcess } from '../../helpers/worker-process.js'

type Labels = Record<string, string>

function parseLabels(raw: string | undefined): Labels {
  const labels: Labels = {}
  for (const m of (raw ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2]
  return labels
}

/** The sum of every sample of `name` whose labels include `labels` (0 when there is none). */
function valueOf(text: string, name: string, labels: Labels = {}): number {
  let sum = 0
  for (const line of text.split('\n')) {
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const found = parseLabels(m[2])
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) sum += Number(m[3])
  }
  return sum
}


describe('GET /metrics', () => {
  let env: TestEnv
  const scrape = async () => {
    const r = await request(env.baseUrl, 'GET', '/metrics', { token: env.adminToken })
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toContain('text/plain')
    return r.text
  }

  beforeAll(async () => {
    env = await startTestEnv({ workers: ['track'] })
  })

  afterAll(async () => {
    await env?.close()
  })

  it('refuses a scrape without the admin token on the API port', async () => {
    expect((await request(env.baseUrl, 'GET', '/metrics')).status).toBe(401)
    expect((await request(env.baseUrl, 'GET', '/metrics', { token: 'not-the-admin-token' })).status).toBe(401)
  })

  it('moves the HTTP, job and queue metrics when a tracked request is applied by a worker', async () => {
    const ws = await env.workspace()
    const before = await scrape()
    const track = { method: 'POST', route: '/users/track' }

    const res = await env.call('POST', '/users/track', {
      key: ws.key,
      body: {
        attributes: [{ external_id: 'metrics-user', first_name: 'Ada' }],
        events: [{ external_id: 'metrics-user', name: 'opened', time: new Date().toISOString() }],
        purchases: [{ external_id: 'metrics-user', product_id: 'p1', currency: 'EUR', price: 3, time: new Date().toISOString() }],
      },
    })
    expect(res.status).toBe(201)
    expect((await env.waitForRequest(ws.key, res.headers.get('x-request-id')!)).status).toBe('done')

    const completedBefore = valueOf(before, 'uds_queue_jobs', { queue: 'track', state: 'completed' })
    // BullMQ marks the job completed just after the processor has reported the request done.
    const after = await until('the completed track job in the queue gauge', scrape, (t) => valueOf(t, 'uds_queue_jobs', { queue: 'track', state: 'completed' }) === completedBefore + 1)
    const moved = (name: string, labels: Labels) => valueOf(after, name, labels) - valueOf(before, name, labels)

    expect(moved('uds_http_requests_total', { ...track, status: '201' })).toBe(1)
    expect(moved('uds_http_request_duration_seconds_count', track)).toBe(1)
    expect(moved('uds_jobs_total', { queue: 'track', outcome: 'ok' })).toBe(1)
    expect(moved('uds_job_duration_seconds_count', { queue: 'track' })).toBe(1)
    expect(moved('uds_objects_applied_total', { queue: 'track' })).toBe(3)
    // The request, accepted and applied well within the ingestion objective (5 s): one observation, in the 5 s bucket.
    expect(moved('uds_request_done_seconds_count', { queue: 'track', status: 'done' })).toBe(1)
    expect(moved('uds_request_done_seconds_bucket', { queue: 'track', status: 'done', le: '5' })).toBe(1)
    expect(moved('uds_request_done_seconds_count', { queue: 'track', status: 'failed' })).toBe(0)
    // This env runs one track worker per partition in this process, and no identity worker.
    for (const partition of ['0', '1', '2', '3']) expect(valueOf(after, 'uds_queue_workers', { queue: 'track', partition })).toBe(1)
    expect(valueOf(after, 'uds_queue_workers', { queue: 'identity' })).toBe(0)
    // The family gauge is the sum of the partition gauges.
    expect(valueOf(after, 'uds_queue_partition_jobs', { queue: 'track', state: 'completed' })).toBe(completedBefore + 1)
  })

  it('reports waiting and delayed jobs per queue family and per track partition', async () => {
    const tenMinutes = 10 * 60_000
    // No identity or callback worker runs in this env, so their jobs stay waiting; delayed jobs stay delayed.
    await env.ctx.queues.get('identity').add('probe', { probe: 1 })
    await env.ctx.queues.get('callback').add('probe', { probe: 2 })
    await env.ctx.queues.get('export').add('probe', { probe: 3 }, { delay: tenMinutes })
    await env.ctx.queues.get('track-2').add('probe', { probe: 4 }, { delay: tenMinutes })
    await env.ctx.queues.get('track-3').add('probe', { probe: 5 }, { delay: tenMinutes })

    const text = await scrape()
    expect(valueOf(text, 'uds_queue_jobs', { queue: 'identity', state: 'waiting' })).toBe(1)
    expect(valueOf(text, 'uds_queue_jobs', { queue: 'callback', state: 'waiting' })).toBe(1)
    expect(valueOf(text, 'uds_queue_jobs', { queue: 'export', state: 'delayed' })).toBe(1)
    expect(valueOf(text, 'uds_queue_jobs', { queue: 'track', state: 'delayed' })).toBe(2)
    expect(valueOf(text, 'uds_queue_partition_jobs', { queue: 'track', partition: '2', state: 'delayed' })).toBe(1)
    expect(valueOf(text, 'uds_queue_partition_jobs', { queue: 'track', partition: '3', state: 'delayed' })).toBe(1)
    expect(valueOf(text, 'uds_queue_partition_jobs', { queue: 'track', partition: '0', state: 'delayed' })).toBe(0)
    for (const state of ['waiting', 'active', 'failed', 'delayed', 'completed']) {
      expect(text).toMatch(new RegExp(`^uds_queue_jobs\\{queue="identity",state="${state}"\\} \\d+$`, 'm'))
    }
  })

  it('counts rate-limit rejections', async () => {
    const ws = await env.workspace()
    const limits = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, { endpoints: { '/users/track': { limit: 1, window_seconds: 3600 } } })
    expect(limits.status).toBe(200)
    const before = valueOf(await scrape(), 'uds_rate_limit_rejections_total')
    const body = { attributes: [{ external_id: 'limited-user', first_name: 'Bo' }] }
    expect((await env.call('POST', '/users/track', { key: ws.key, body })).status).toBe(201)
    expect((await env.call('POST', '/users/track', { key: ws.key, body })).status).toBe(429)
    expect(valueOf(await scrape(), 'uds_rate_limit_rejections_total') - before).toBe(1)
  })
})

describe('METRICS_PORT of a worker-only process', () => {
  let env: TestEnv
  const dataDir = path.join(os.tmpdir(), `uds-test-metrics-worker-${process.pid}`)

  beforeAll(async () => {
    env = await startTestEnv({ engine: false })
  })

  afterAll(async () => {
    await env?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  it('serves the worker metrics without auth on its own port', async () => {
    const port = await freePort()
    const worker = spawnWorkerProcess(env, dataDir, ['track'], { METRICS_PORT: String(port), HOST: '127.0.0.1' })
    try {
      const metricsUrl = `http://127.0.0.1:${port}`
      await until('the worker metrics listener', () => fetch(`${metricsUrl}/metrics`).then((r) => r.status, () => 0), (s) => s === 200, 60_000)

      const ws = await env.workspace()
      const res = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [{ external_id: 'worker-metrics', first_name: 'Cy' }] } })
      expect(res.status).toBe(201)
      expect((await env.waitForRequest(ws.key, res.headers.get('x-request-id')!, 60_000)).status).toBe('done')

      const text = await until(
        'the job in the worker metrics',
        () => request(metricsUrl, 'GET', '/metrics').then((r) => r.text),
        (t) => valueOf(t, 'uds_jobs_total', { queue: 'track', outcome: 'ok' }) === 1,
      )
      expect(valueOf(text, 'uds_objects_applied_total', { queue: 'track' })).toBe(1)
      expect(valueOf(text, 'uds_request_done_seconds_count', { queue: 'track', status: 'done' })).toBe(1)
      expect(valueOf(text, 'uds_queue_jobs', { queue: 'track', state: 'completed' })).toBe(1)
      expect(text).toContain('process_cpu_user_seconds_total')
    } finally {
      worker.kill('SIGTERM')
      await exited(worker)
    }
  })
})

describe('backlog bounds, named workspaces and stalled jobs', () => {
  let env: TestEnv
  const scrape = async () => (await request(env.baseUrl, 'GET', '/metrics', { token: env.adminToken })).text

  beforeAll(async () => {
    env = await startTestEnv()
  })

  afterAll(async () => {
    await env?.close()
  })

  it('reports the bounds, and names only a workspace holding half of its bound or more', async () => {
    env.metrics.setBacklogBounds({ all: 100_000, workspace: 10 })
    const [near, far] = [await env.workspace(), await env.workspace()]
    const attributes = (n: number, who: string) => Array.from({ length: n }, (_, i) => ({ external_id: `${who}-${i}`, first_name: 'Al' }))
    // No worker runs in this env: the objects stay in the backlog.
    expect((await env.call('POST', '/users/track', { key: near.key, body: { attributes: attributes(6, 'near') } })).status).toBe(201)
    expect((await env.call('POST', '/users/track', { key: far.key, body: { attributes: attributes(2, 'far') } })).status).toBe(201)
    const text = await scrape()
    expect(valueOf(text, 'uds_track_backlog_limit_objects', { scope: 'all' })).toBe(100_000)
    expect(valueOf(text, 'uds_track_backlog_limit_objects', { scope: 'workspace' })).toBe(10)
    expect(valueOf(text, 'uds_track_backlog_objects')).toBe(8)
    expect(valueOf(text, 'uds_track_backlog_workspace_objects', { workspace: near.id })).toBe(6)
    expect(text).not.toContain(far.id)
  })

  it('counts a job whose worker died holding it (active, no lock) when it goes back to its queue', async () => {
    const queue = env.ctx.queues.get('identity')
    await queue.add('applyIdentityChange', { probe: 'stalled' }, { jobId: 'stalled-probe', attempts: 1 })
    // What a worker killed mid-job leaves: the job moved to active, its lock gone with the worker.
    await env.ctx.redis.lmove(queue.keys.wait, queue.keys.active, 'RIGHT', 'LEFT')
    expect(await queue.getActiveCount()).toBe(1)
    await env.startWorkers(['identity'])
    // BullMQ's check marks the lockless job, and moves it back on its next pass (JOB_LOCK_MS / 2 apart).
    const text = await until('the stalled job counted', scrape, (t) => valueOf(t, 'uds_jobs_stalled_total', { queue: 'identity' }) === 1, 30_000, 250)
    expect(valueOf(text, 'uds_queue_workers', { queue: 'identity' })).toBe(1)
  })
})

describe('the sample Grafana dashboard', () => {
  it('queries only metrics the service exports', async () => {
    const dashboard = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '../../../infra/grafana/dashboard.json'), 'utf8'))
    const exprs: string[] = dashboard.panels.flatMap((p: { targets?: { expr: string }[] }) => (p.targets ?? []).map((t) => t.expr))
    const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\b((?:uds|process|nodejs)_\w+)\b/g)].map((m) => m[1])))
    const exposition = await createMetrics().registry.metrics()
    const types = new Map([...exposition.matchAll(/^# TYPE (\w+) (\w+)$/gm)].map((m) => [m[1], m[2]]))
    const exported = (name: string) => types.has(name) || types.get(name.replace(/_(bucket|count|sum)$/, '')) === 'histogram'
    expect(used.size).toBeGreaterThan(10)
    expect([...used].filter((name) => !exported(name))).toEqual([])
    for (const name of ['uds_http_requests_total', 'uds_queue_jobs', 'uds_queue_partition_jobs', 'uds_jobs_total', 'uds_export_rows_total', 'uds_rate_limit_rejections_total']) {
      expect(used.has(name), `dashboard uses ${name}`).toBe(true)
    }
  })
})
