import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SERVICE_NODE_FLAGS, serviceProcessEnv } from '../../bin/process-flags.js'
import { canMakeHosts, createLab, startDataHost, type Lab } from '../helpers/netns.js'
import { expectOrderedOutcome, orderedLoad, sendOrdered, waitAllDone } from '../helpers/ordered-load.js'
import { caller, expectStatus, type Call } from '../helpers/route-tour.js'
import { until } from '../helpers/wait.js'

/**
 * The service on real hosts (network namespaces: CI runs as root): a data host with Postgres and
 * Redis, an API host, and two worker hosts each with a DATA_DIR of its own. The first worker host
 * holds the embedded engine; the second works through it. A worker host is cut off mid-load (its
 * link down at the switch) and brought back: nothing is lost or doubled, each user's order holds.
 */
const root = path.resolve(import.meta.dirname, '../..')
let lab: Lab
let data: Awaited<ReturnType<typeof startDataHost>>
const procs: ChildProcess[] = []
const dirs = { api: '', w1: '', w2: '' }
let out = ''
let call: Call
let key: string
let ws: string
let adminToken: string
/** Users the first test creates beside its load, for the second's segment count. */
let extraUsers = 0
const METRICS_PORT = 9464

function startService(host: 'api' | 'w1' | 'w2'): ChildProcess {
  const role = host === 'api' ? 'api' : 'worker'
  const env = serviceProcessEnv({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: data.databaseUrl('userdata'),
    REDIS_URL: data.redisUrl,
    DATA_DIR: dirs[host],
    HOST: lab.ip(host),
    PORT: '3000',
    ADMIN_TOKEN: adminToken,
    JOB_LOCK_MS: '5000',
    LOG_LEVEL: 'warn',
    ...(role === 'worker' ? { METRICS_PORT: String(METRICS_PORT) } : {}),
  })
  const p = lab.spawn(host, process.execPath, [...SERVICE_NODE_FLAGS, '--import', 'tsx', 'bin/main.ts', role], { env, cwd: root })
  p.stdout!.on('data', (d) => (out += `[${host}] ${d}`))
  p.stderr!.on('data', (d) => (out += `[${host}] ${d}`))
  procs.push(p)
  return p
}

const metricsOf = (host: 'w1' | 'w2') => `http://${lab.ip(host)}:${METRICS_PORT}/metrics`
const applied = async (host: 'w1' | 'w2') => {
  const text = await fetch(metricsOf(host)).then((r) => r.text())
  return text.split('\n').filter((l) => l.startsWith('uds_objects_applied_total{')).reduce((n, l) => n + Number(l.split(' ').pop()), 0)
}

describe.skipIf(!canMakeHosts())('the service on several hosts', () => {
  beforeAll(async () => {
    lab = createLab(['data', 'api', 'w1', 'w2'])
    data = await startDataHost(lab, 'data')
    for (const h of ['api', 'w1', 'w2'] as const) dirs[h] = mkdtempSync(path.join(os.tmpdir(), `uds-lab-${h}-`))
    adminToken = `lab-admin-${Date.now()}-token`
    // The first worker host starts first: a new deployment's engine is made where a worker first starts.
    startService('w1')
    await until('the engine host', () => fetch(metricsOf('w1')).then((r) => r.status, () => 0), (s) => s === 200, 120_000, 200)
    startService('api')
    startService('w2')
    call = caller(`http://${lab.ip('api')}:3000`)
    await until('the API host', () => call('GET', '/readyz').catch(() => undefined), (r) => r?.status === 200, 120_000, 200)
    await until('the second worker host', () => fetch(metricsOf('w2')).then((r) => r.status, () => 0), (s) => s === 200, 120_000, 200)
    const credentials = JSON.parse(readFileSync(path.join(dirs.api, 'credentials.json'), 'utf8'))
    key = credentials.api_key
    ws = credentials.workspace_id
  }, 300_000)

  afterAll(async () => {
    for (const p of procs) p.kill('SIGKILL')
    await data?.stop()
    lab?.destroy()
    for (const d of Object.values(dirs)) if (d) rmSync(d, { recursive: true, force: true })
  })

  it('loses and doubles nothing, and keeps each user\'s order, while a worker host is cut off and comes back', async () => {
    const load = orderedLoad({ tag: 'cut-w2', users: 120, requests: 420, perRequest: 6, lanes: 6 })
    const before = { w1: await applied('w1'), w2: await applied('w2') }
    const members = async () => {
      const redis = new Redis(data.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
      try {
        await redis.connect()
        return await redis.zcard('uds:members:track')
      } finally {
        redis.disconnect()
      }
    }
    // Cut, once it is applying, for longer than a job lock: the other host takes its partitions and active jobs over.
    let atMend = 0
    let reachableWhileCut: boolean | undefined
    const ids = await sendOrdered(call, key, load, {
      between: async (k) => {
        if (k === 100) {
          await until('the second host to apply work', () => applied('w2'), (n) => n > before.w2, 60_000, 100)
          lab.cut('w2')
          await new Promise((r) => setTimeout(r, 4_000))
          reachableWhileCut = await fetch(metricsOf('w2'), { signal: AbortSignal.timeout(2_000) }).then(() => true, () => false)
        }
        if (k === 250) {
          // Sent meanwhile: the first host's alone. Back, the second host rejoins and takes its share again.
          await new Promise((r) => setTimeout(r, 8_000))
          lab.mend('w2')
          await until('the second host to rejoin the track group', members, (n) => n === 2, 60_000, 200)
          atMend = await applied('w2')
        }
      },
    })
    expect(reachableWhileCut).toBe(false)
    await waitAllDone(call, key, ids, 240_000)
    await expectOrderedOutcome(call, key, load)
    expect(await applied('w1')).toBeGreaterThan(before.w1)
    expect(atMend, 'the cut host applied work before the cut').toBeGreaterThan(before.w2)
    // Back, it takes its share of new work again (its connections resume once TCP retransmits get through).
    const more = () => call('POST', '/users/track', { token: key, body: { attributes: Array.from({ length: 8 }, () => ({ external_id: `after-mend-${extraUsers++}`, plan: 'x' })) } })
    await until('the host that came back to apply work', async () => (await more(), applied('w2')), (m) => m > atMend, 120_000, 250)
  }, 600_000)

  it('makes no second engine while the engine host is cut off: the work waits for it, and then applies whole', async () => {
    const load = orderedLoad({ tag: 'cut-w1', users: 60, requests: 180, perRequest: 4, lanes: 4 })
    const seg = expectStatus(await call('POST', `/admin/v1/workspaces/${ws}/segments`, { token: adminToken, body: { name: 'everyone', filter: { all: [] } } }), 201)
    let during: { size?: number; w2Engine?: boolean } = {}
    const ids = await sendOrdered(call, key, load, {
      between: async (k) => {
        if (k === 40) lab.cut('w1')
        if (k === 120) {
          // While the engine host is away the other worker host never opens an engine of its own, and a read says it waits.
          const size = await call('GET', `/admin/v1/workspaces/${ws}/segments/${seg.body.segment_id}`, { token: adminToken })
          during = { size: size.status, w2Engine: existsSync(path.join(dirs.w2, 'clickhouse', 'metadata')) }
        }
      },
    })
    // Longer than a job lock and the engine's heartbeat: anything that would take over has had the time to.
    await new Promise((r) => setTimeout(r, 10_000))
    lab.mend('w1')
    await waitAllDone(call, key, ids, 240_000)
    await expectOrderedOutcome(call, key, load)
    expect(during).toEqual({ size: 503, w2Engine: false })
    expect(existsSync(path.join(dirs.w2, 'clickhouse', 'metadata'))).toBe(false)
    const size = expectStatus(await call('GET', `/admin/v1/workspaces/${ws}/segments/${seg.body.segment_id}`, { token: adminToken }), 200)
    expect(size.body.size).toBe(180 + extraUsers)
  }, 600_000)
})
