import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { request } from '../helpers/harness.js'
import { freePort } from '../helpers/ports.js'
import { startMakeRun, type ServiceProcesses } from '../helpers/service-process.js'
import { sleep, until } from '../helpers/wait.js'

/**
 * A real Prometheus (Debian's package; `make test` installs it) scraping the service started as
 * `make run` starts it: the API on its port with the admin token, the worker on METRICS_PORT,
 * every second. The rule is TrackPartitionLagging of infra/prometheus/alerts.yml with its
 * expression as is and only its `for` shortened. The worker is stopped (SIGSTOP) while track work
 * arrives: the alert fires naming the lagging partition; the worker continues: it resolves.
 */
const root = path.resolve(import.meta.dirname, '../..')
const scratch = mkdtempSync(path.join(os.tmpdir(), 'uds-prometheus-'))
let svc: ServiceProcesses
let prometheus: ChildProcess
let promUrl: string
let promOutput = ''

interface Rule {
  alert?: string
  expr: string
  for?: string
}
interface Alert {
  labels: Record<string, string>
  annotations: Record<string, string>
  state: string
}

const lagRule = (parse(readFileSync(path.join(root, 'infra/prometheus/alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }).groups
  .flatMap((g) => g.rules)
  .find((r) => r.alert === 'TrackPartitionLagging')!
const LAG_BOUND_SECONDS = Number(/> (\d+)$/.exec(lagRule.expr)![1])

async function promGet<T>(p: string): Promise<T> {
  const r = await fetch(`${promUrl}${p}`)
  const body = (await r.json()) as { status: string; data: T }
  if (body.status !== 'success') throw new Error(`${p}: ${JSON.stringify(body)}`)
  return body.data
}

const lagAlerts = async () => (await promGet<{ alerts: Alert[] }>('/api/v1/alerts')).alerts.filter((a) => a.labels.alertname === 'TrackPartitionLagging')

beforeAll(async () => {
  const workerMetricsPort = await freePort()
  svc = await startMakeRun({ METRICS_PORT: String(workerMetricsPort) })
  const api = new URL(svc.apis[0])

  writeFileSync(path.join(scratch, 'admin-token'), svc.adminToken)
  writeFileSync(path.join(scratch, 'rules.yml'), stringify({ groups: [{ name: 'lag', rules: [{ ...lagRule, for: '3s' }] }] }))
  writeFileSync(
    path.join(scratch, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: ['rules.yml'],
      scrape_configs: [
        {
          job_name: 'userdata-api',
          authorization: { type: 'Bearer', credentials_file: path.join(scratch, 'admin-token') },
          static_configs: [{ targets: [api.host] }],
        },
        { job_name: 'userdata-workers', static_configs: [{ targets: [`127.0.0.1:${workerMetricsPort}`] }] },
      ],
    }),
  )
  const port = await freePort()
  promUrl = `http://127.0.0.1:${port}`
  prometheus = spawn(
    'prometheus',
    [`--config.file=${path.join(scratch, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(scratch, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  prometheus.stdout!.on('data', (d) => (promOutput += d))
  prometheus.stderr!.on('data', (d) => (promOutput += d))
  prometheus.on('error', (e) => (promOutput += `could not start prometheus (make test installs it): ${e.message}\n`))
  try {
    await until('Prometheus to be ready', () => fetch(`${promUrl}/-/ready`).then((r) => r.status, () => 0), (s) => s === 200, 30_000, 200)
  } catch (e) {
    throw new Error(`${(e as Error).message}\n--- prometheus output ---\n${promOutput}`)
  }
}, 180_000)

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    prometheus.kill('SIGTERM')
    await new Promise((r) => prometheus.once('exit', r))
  }
  await svc?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

describe('TrackPartitionLagging in a real Prometheus', () => {
  it('fires while the worker is stopped and track work arrives, and resolves once it runs again', async () => {
    // Both processes scraped, the rule loaded and evaluated, nothing lagging.
    const targets = await until(
      'both targets scraped',
      () => promGet<{ activeTargets: { labels: { job: string }; health: string }[] }>('/api/v1/targets'),
      (d) => d.activeTargets.filter((t) => t.health === 'up').length === 2,
      30_000,
      250,
    )
    expect(targets.activeTargets.map((t) => t.labels.job).sort()).toEqual(['userdata-api', 'userdata-workers'])
    const rules = await promGet<{ groups: { rules: { name: string; query: string; health: string; state: string }[] }[] }>('/api/v1/rules')
    expect(rules.groups[0].rules[0]).toMatchObject({ name: 'TrackPartitionLagging', query: expect.stringContaining('uds_queue_lag_seconds'), health: 'ok', state: 'inactive' })
    expect(await lagAlerts()).toEqual([])

    const key = svc.credentials.api_key
    const track = async (n: number) => {
      const r = await request(svc.apis[0], 'POST', '/users/track', {
        token: key,
        body: { attributes: [{ external_id: `lagging-${n}`, n }], events: [{ external_id: `lagging-${n}`, name: 'tick', time: new Date().toISOString() }] },
      })
      expect(r.status).toBe(201)
      return r.headers.get('x-request-id')!
    }
    const requestIds: string[] = []
    let firing: Alert[]
    svc.signal('worker', 'SIGSTOP')
    try {
      // Work keeps arriving while the worker is stopped; the lag only counts from the oldest job.
      const stoppedAt = Date.now()
      for (let n = 0; n < 8; n++) requestIds.push(await track(n))
      firing = await until(
        'TrackPartitionLagging to fire',
        async () => {
          requestIds.push(await track(requestIds.length))
          return (await lagAlerts()).filter((a) => a.state === 'firing')
        },
        (a) => a.length > 0,
        (LAG_BOUND_SECONDS + 60) * 1000,
        1000,
      )
      expect(Date.now() - stoppedAt).toBeGreaterThan(LAG_BOUND_SECONDS * 1000)
      // The alert names the partitions lagging past the bound, as the service reports them.
      const backlog = await request(svc.apis[0], 'GET', '/admin/queues/backlog', { token: svc.adminToken })
      const lagging = Object.entries(backlog.body.lag_seconds as Record<string, number>).filter(([, s]) => s > LAG_BOUND_SECONDS).map(([q]) => q)
      expect(lagging.length).toBeGreaterThan(0)
      for (const a of firing) {
        expect(a.labels).toMatchObject({ severity: 'page', queue: 'track' })
        expect(lagging).toContain(`track-${a.labels.partition}`)
        expect(a.annotations.summary).toMatch(new RegExp(`^Queue track, partition ${a.labels.partition}: the oldest job not yet applied was accepted [\\d.]+s ago$`))
        expect(a.annotations.runbook_url).toBe('docs/operations.md#trackpartitionlagging')
      }
    } finally {
      svc.signal('worker', 'SIGCONT')
    }

    // The worker applies what waited; the lag drops to 0 and the alert goes away.
    await until('TrackPartitionLagging to resolve', lagAlerts, (a) => a.length === 0, 60_000, 500)
    for (const id of requestIds) {
      const r = await until(`request ${id} done`, () => request(svc.apis[0], 'GET', `/requests/${id}`, { token: key }), (x) => x.body?.status === 'done', 30_000, 200)
      expect(r.body.status).toBe('done')
    }
    // The lag series went over the bound and back to 0 in Prometheus itself.
    await sleep(1500)
    const peak = await promGet<{ result: { value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent('max(max_over_time(uds_queue_lag_seconds[5m]))')}`)
    expect(Number(peak.result[0].value[1])).toBeGreaterThan(LAG_BOUND_SECONDS)
    const now = await promGet<{ result: { value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent('max(uds_queue_lag_seconds)')}`)
    expect(Number(now.result[0].value[1])).toBe(0)
  }, 240_000)
})
