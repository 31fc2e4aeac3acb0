import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { SERVICE_ALLOCATOR_ENV, workerPriority } from '../../bin/process-flags.js'
import { dropTestDatabase } from '../helpers/harness.js'
import { freePort } from '../helpers/ports.js'
import { alive, childPids, statFields } from '../helpers/proc.js'
import { until } from '../helpers/wait.js'
import { exited } from '../helpers/worker-process.js'

const ROOT = path.resolve(import.meta.dirname, '../..')
const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanups) await c()
})


function kill(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false
  }
}

/** Linux's scheduling policies as /proc reports them (sched.h). */
const SCHED_OTHER = 0
const SCHED_IDLE = 5

/** Scheduling policy and nice value of every thread of a process, with the thread's name. */
function threadPriorities(pid: number): { name: string; policy: number; nice: number }[] {
  const dir = `/proc/${pid}/task`
  return readdirSync(dir).map((tid) => {
    const fields = statFields(`${dir}/${tid}/stat`)
    return { name: readFileSync(`${dir}/${tid}/comm`, 'utf8').trim(), policy: Number(fields[38]), nice: Number(fields[16]) }
  })
}

interface Supervisor {
  proc: ChildProcess
  stdout: () => string
  stderr: () => string
  url: string
  metricsUrl: string
  /** The supervisor's child running `main.ts <role>`, if it has one now. */
  child(role: 'api' | 'worker'): number | undefined
  dataDir: string
  dbName: string
  prefix: string
}

/**
 * `bin/run-local.ts` as `npm start` runs it, on a database, DATA_DIR and queue prefix that nothing
 * created yet, or (`again`) on those of a supervisor started before.
 */
async function startSupervisor(env: Record<string, string> = {}, again?: Supervisor): Promise<Supervisor> {
  const dataDir = again?.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'uds-run-local-'))
  const dbName = again?.dbName ?? `uds_test_runlocal_${randomBytes(4).toString('hex')}`
  const prefix = again?.prefix ?? `udstest_${randomBytes(5).toString('hex')}`
  const port = await freePort()
  const metricsPort = await freePort()
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/run-local.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATA_DIR: dataDir,
      DATABASE_URL: `postgres://127.0.0.1:5432/${dbName}`,
      QUEUE_PREFIX: prefix,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  proc.stdout!.on('data', (d) => (out += d))
  proc.stderr!.on('data', (d) => (err += d))
  const seen = new Set<number>()
  const child = (role: 'api' | 'worker') =>
    childPids(proc.pid!).find((pid) => {
      try {
        const found = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`main.ts\0${role}\0`)
        if (found) seen.add(pid)
        return found
      } catch {
        return false
      }
    })
  cleanups.push(async () => {
    for (const pid of [...childPids(proc.pid!), ...seen]) kill(pid, 'SIGKILL')
    kill(proc.pid!, 'SIGKILL')
    await dropTestDatabase(dbName).catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  })
  return { proc, stdout: () => out, stderr: () => err, url: `http://127.0.0.1:${port}`, metricsUrl: `http://127.0.0.1:${metricsPort}`, child, dataDir, dbName, prefix }
}

const status = (url: string, init?: RequestInit) => fetch(url, init).then((r) => r.status, () => 0)

async function trackAndWait(sup: Supervisor, key: string, externalId: string, body: unknown = { attributes: [{ external_id: externalId, visits: { inc: 1 } }] }): Promise<string> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const res = await fetch(`${sup.url}/users/track`, { method: 'POST', headers, body: JSON.stringify(body) })
  expect(res.status).toBeLessThan(300)
  const id = res.headers.get('x-request-id')!
  const done = await until(
    `request ${id} applied`,
    () => fetch(`${sup.url}/requests/${id}`, { headers }).then((r) => r.json() as Promise<{ status: string }>),
    (b) => b.status === 'done' || b.status === 'failed',
    60_000,
  )
  return done.status
}

async function banner(sup: Supervisor): Promise<string> {
  await until('the API banner', () => sup.stdout() + (sup.proc.exitCode ?? ''), (s) => s.includes('SCIM token:') || sup.proc.exitCode !== null, 120_000)
  const key = /API key:\s+(\S+)/.exec(sup.stdout())?.[1]
  if (!key) throw new Error(`no banner (exit ${sup.proc.exitCode}): ${sup.stdout()}\n${sup.stderr()}`)
  return key
}

describe('bin/run-local.ts (make run)', () => {
  it('runs the API and a lower-priority worker as two processes from a fresh database, restarts either when it dies, and stops on SIGTERM', async () => {
    // At make run's default level: a line per request and per job.
    const sup = await startSupervisor({ LOG_LEVEL: 'info' })
    const key = await banner(sup)
    expect(sup.stdout()).toMatch(/^API listening on http:\/\/127\.0\.0\.1:\d+$/m)
    expect(sup.stdout()).toMatch(/^admin token: +\S+/m)
    await until('the worker', () => status(`${sup.metricsUrl}/metrics`), (s) => s === 200, 120_000)
    // Idle connections live longer than clients' pools keep them (no reset on reuse).
    const keepAlive = await new Promise<string | undefined>((resolve, reject) => {
      http
        .get(`${sup.url}/healthz`, (res) => {
          res.resume()
          resolve(res.headers['keep-alive'] as string | undefined)
        })
        .on('error', reject)
    })
    expect(keepAlive).toBe('timeout=65')

    const api = sup.child('api')!
    const worker = sup.child('worker')!
    expect(api).toBeGreaterThan(0)
    expect(worker).toBeGreaterThan(0)
    expect(api).not.toBe(worker)
    expect(threadPriorities(api).filter((t) => t.policy !== SCHED_OTHER || t.nice !== 0)).toEqual([])
    // Every thread the worker's runtime made is in the idle class, the engine's too (chDB's
    // MemoryWorker thread raises its nice value, which the idle class ignores); at nice 10 where
    // the machine has no chrt.
    const workerThreads = threadPriorities(worker)
    expect(workerThreads.length).toBeGreaterThan(5)
    if (workerPriority()[0] === 'chrt') expect(workerThreads.filter((t) => t.policy !== SCHED_IDLE)).toEqual([])
    else expect(workerThreads.filter((t) => t.name !== 'MemoryWorker' && t.nice !== 10)).toEqual([])
    // Both run with the service's V8 flags (a larger young generation).
    for (const pid of [api, worker]) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain('--max-semi-space-size=64')
    // And with the allocator settings in their environment from the start (glibc splits the
    // tunables it has read at their colons, so each is looked for on its own).
    for (const pid of [api, worker]) {
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8')
      for (const [name, value] of Object.entries(SERVICE_ALLOCATOR_ENV)) {
        expect(environ.split('\0').some((entry) => entry.startsWith(`${name}=`))).toBe(true)
        for (const part of value.split(':')) expect(environ).toContain(part)
      }
    }

    expect(await trackAndWait(sup, key, 'run-local-1')).toBe('done')
    // Both processes' standard output arrives while they run (buffered, flushed at least every
    // second): the API's request line and the worker's job line share the request id.
    const jsonLines = () => sup.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>)
    const apiLine = await until('the API request line', () => jsonLines().find((l) => l.req?.path === '/users/track'), Boolean, 10_000)
    expect(apiLine).toMatchObject({ res: { statusCode: 201 }, msg: 'POST /users/track 201' })
    const jobLine = await until('the job line', () => jsonLines().find((l) => l.msg === 'job finished' && l.requestId === apiLine!.requestId), Boolean, 10_000)
    expect(jobLine).toMatchObject({ outcome: 'ok', queue: expect.stringMatching(/^track-\d+$/) })
    // An event's properties go from the API to the worker's process as JSON text and into the
    // history; an escape in them (here a line break) takes the API's full look at texts.
    const event = { external_id: 'run-local-1', name: 'opened', time: new Date().toISOString(), properties: { note: 'line\nbreak ünï', n: [1, { d: true }] } }
    expect(await trackAndWait(sup, key, 'run-local-1', { events: [event, { ...event, properties: { plain: 'ünï' } }] })).toBe('done')
    const exported = await fetch(`${sup.url}/users/export/ids`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ external_ids: ['run-local-1'], fields_to_export: ['custom_events'] }),
    }).then((r) => r.json() as Promise<{ users: { custom_events?: { name: string; count: number }[] }[] }>)
    expect(exported.users[0].custom_events).toMatchObject([{ name: 'opened', count: 2 }])

    // A worker killed outright is replaced at once (its engine lock died with it).
    kill(worker, 'SIGKILL')
    const worker2 = await until('a new worker', () => sup.child('worker'), (pid) => pid !== undefined && pid !== worker, 30_000)
    await until('the new worker', () => status(`${sup.metricsUrl}/metrics`), (s) => s === 200, 120_000)
    expect(await trackAndWait(sup, key, 'run-local-2')).toBe('done')

    kill(api, 'SIGKILL')
    const api2 = await until('a new API', () => sup.child('api'), (pid) => pid !== undefined && pid !== api, 30_000)
    await until('the new API', () => status(`${sup.url}/requests/00000000-0000-0000-0000-000000000000`, { headers: { authorization: `Bearer ${key}` } }), (s) => s === 404, 120_000)
    expect(await trackAndWait(sup, key, 'run-local-3')).toBe('done')
    expect(sup.proc.exitCode).toBeNull()

    sup.proc.kill('SIGTERM')
    expect(await exited(sup.proc)).toBe(0)
    expect(alive(api2!)).toBe(false)
    expect(alive(worker2!)).toBe(false)
  }, 300_000)

  it('says ready only once reads are answered, and shows the credentials on the first start only', async () => {
    const sup = await startSupervisor()
    await until('the ready line', () => sup.stdout() + (sup.proc.exitCode ?? ''), (s) => /^ready: /m.test(s) || sup.proc.exitCode !== null, 120_000)
    const credentials = JSON.parse(readFileSync(path.join(sup.dataDir, 'credentials.json'), 'utf8'))
    // The moment it says ready, a ClickHouse read (a segment size) is answered, not refused with 503.
    const headers = { authorization: `Bearer ${credentials.admin_token}`, 'content-type': 'application/json' }
    const seg = await fetch(`${sup.url}/admin/v1/workspaces/${credentials.workspace_id}/segments`, { method: 'POST', headers, body: JSON.stringify({ name: 'all', filter: { all: [] } }) })
    const { segment_id } = (await seg.json()) as { segment_id: string }
    expect(await status(`${sup.url}/admin/v1/workspaces/${credentials.workspace_id}/segments/${segment_id}`, { headers })).toBe(200)
    // Every credential of the first start is in the file, readable by its owner only, and was shown once.
    expect(credentials).toMatchObject({ admin_token: expect.any(String), api_key: expect.any(String), scim_token: expect.any(String) })
    expect(statSync(path.join(sup.dataDir, 'credentials.json')).mode & 0o777).toBe(0o600)
    expect(sup.stdout()).toContain(credentials.api_key)
    sup.proc.kill('SIGTERM')
    expect(await exited(sup.proc)).toBe(0)

    const again = await startSupervisor({}, sup)
    await until('the second ready line', () => again.stdout(), (s) => /^ready: /m.test(s), 120_000)
    expect(again.stdout()).not.toContain(credentials.api_key)
    expect(again.stdout()).not.toContain(credentials.admin_token)
    expect(again.stdout()).toContain(`credentials:   ${sup.dataDir}/credentials.json`)
    again.proc.kill('SIGTERM')
    expect(await exited(again.proc)).toBe(0)
  }, 300_000)

  it('reports a bad variable once and exits 2 without starting anything', async () => {
    const sup = await startSupervisor({ PORT: 'abc' })
    expect(await exited(sup.proc)).toBe(2)
    expect(sup.stderr().match(/^\s*PORT: /gm)).toHaveLength(1)
    expect(sup.stdout()).not.toContain('API listening')
  })

  it('takes its children down when it is killed outright, so none keeps the port or the engine', async () => {
    const sup = await startSupervisor()
    await banner(sup)
    const api = await until('the API process', () => sup.child('api'), (pid) => pid !== undefined, 30_000)
    const worker = await until('the worker process', () => sup.child('worker'), (pid) => pid !== undefined, 30_000)
    await until('the worker', () => status(`${sup.metricsUrl}/metrics`), (s) => s === 200, 120_000)
    sup.proc.kill('SIGKILL')
    await until('both children to stop', () => alive(api!) || alive(worker!), (any) => !any, 30_000)
  }, 180_000)
})
