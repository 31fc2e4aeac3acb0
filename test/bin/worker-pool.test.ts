import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectOrderedOutcome, objectsApplied, orderedLoad, sendOrdered, waitAllDone } from '../helpers/ordered-load.js'
import { caller, expectStatus, type Call } from '../helpers/route-tour.js'
import { startWorkerPool, type WorkerPool } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'
import { exited } from '../helpers/worker-process.js'

/**
 * The README's scaled mode with a pool: one API process and three worker processes on one
 * DATA_DIR, plus a fourth on a DATA_DIR of its own (as on another host). One process holds the
 * embedded engine; the others reach it through Redis, and one of them takes it over when the
 * holder is killed.
 */
let pool: WorkerPool
let call: Call
let key: string
const otherDir = mkdtempSync(path.join(os.tmpdir(), 'uds-pool-other-'))

beforeAll(async () => {
  pool = await startWorkerPool({ workers: [{}, {}, {}, { dataDir: otherDir }], env: { JOB_LOCK_MS: '5000' } })
  call = caller(pool.apis[0])
  key = pool.credentials.api_key
}, 180_000)

afterAll(async () => {
  await pool?.stop()
})

const holderPid = () => Number(readFileSync(path.join(pool.dataDir, 'clickhouse', 'owner.pid'), 'utf8'))

describe('a pool of worker processes', () => {
  it('applies a load exactly once and in order per user while the engine holder is killed and restarted, every process applying work', async () => {
    const load = orderedLoad({ tag: 'pool', users: 120, requests: 480, perRequest: 6, lanes: 8 })
    const holder = pool.workers.findIndex((w) => w.pid === holderPid())
    expect(holder).toBeGreaterThanOrEqual(0)
    let killed = false
    const ids = await sendOrdered(call, key, load, {
      between: async (k) => {
        if (k !== 160 || killed) return
        killed = true
        pool.workers[holder].kill('SIGKILL')
        await exited(pool.workers[holder])
        pool.restart(holder)
      },
    })
    await waitAllDone(call, key, ids)
    await expectOrderedOutcome(call, key, load)

    // Another process holds the engine now (a standby took it over); the restarted one stands by.
    expect(pool.workers.map((w) => w.pid)).toContain(holderPid())
    await until('every worker to answer its metrics', () => Promise.all(pool.metricsPorts.map((p) => objectsApplied(p).catch(() => -1))), (ns) => ns.every((n) => n >= 0), 60_000)
    const applied = await Promise.all(pool.metricsPorts.map((p) => objectsApplied(p)))
    // The restarted worker counts from its restart; the others from the start of the load.
    for (const [i, n] of applied.entries()) if (i !== holder) expect(n, `worker ${i} applied work`).toBeGreaterThan(0)
  }, 600_000)

  it('never makes a second engine in another DATA_DIR: its worker works through the holder', async () => {
    // The fourth worker's DATA_DIR holds no engine of this deployment, and never gets one.
    expect(existsSync(path.join(otherDir, 'clickhouse', 'metadata'))).toBe(false)
    const seg = expectStatus(await call('POST', `/admin/v1/workspaces/${pool.credentials.workspace_id}/segments`, { token: pool.adminToken, body: { name: 'all', filter: { all: [] } } }), 201)
    const size = expectStatus(await call('GET', `/admin/v1/workspaces/${pool.credentials.workspace_id}/segments/${seg.body.segment_id}`, { token: pool.adminToken }), 200)
    expect(size.body.size).toBe(120)
    expect(await objectsApplied(pool.metricsPorts[3])).toBeGreaterThan(0)
  })
})
