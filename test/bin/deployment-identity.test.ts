import { spawn } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SERVICE_NODE_FLAGS, serviceProcessEnv } from '../../bin/process-flags.js'
import { submitRequest } from '../../shared/queue/jobs.js'
import { QueueRegistry } from '../../shared/queue/queues.js'
import { RequestTracker } from '../../shared/queue/request-tracker.js'
import { TrackLayouts } from '../../shared/queue/track-layout.js'
import { createTestDatabase, dbUrl, dropTestDatabase } from '../helpers/harness.js'
import { startWorkerPool, type WorkerPool } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'

/**
 * A deployment's parts belong together: processes of another deployment sharing its Redis prefix,
 * or a copy of its engine on a second host, are refused with a message naming the setting; a job
 * for a workspace its database does not know fails rather than being reported done.
 */
let pool: WorkerPool
const root = path.resolve(import.meta.dirname, '../..')
const dirs: string[] = []
let otherDb: string

beforeAll(async () => {
  pool = await startWorkerPool({ workers: [{}] })
  otherDb = await createTestDatabase()
}, 180_000)

afterAll(async () => {
  await pool?.stop()
  await dropTestDatabase(otherDb)
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Runs a service process to its end (it must refuse quickly); answers its exit code and what it printed. */
function runToEnd(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, '--import', 'tsx', 'bin/main.ts', ...args], {
    cwd: root,
    env: serviceProcessEnv({ PATH: process.env.PATH, HOME: process.env.HOME, REDIS_URL: pool.env.REDIS_URL, LOG_LEVEL: 'warn', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (out += d))
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  return new Promise((resolve) => child.once('exit', (code) => (clearTimeout(timer), resolve({ code, out }))))
}

describe('a deployment knows itself', () => {
  it('refuses the processes of another deployment that share its Redis prefix, naming QUEUE_PREFIX', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-foreign-'))
    dirs.push(dataDir)
    for (const role of [['api'], ['worker', 'track']]) {
      const r = await runToEnd(role, { DATABASE_URL: dbUrl(otherDb), QUEUE_PREFIX: pool.env.QUEUE_PREFIX, DATA_DIR: dataDir, PORT: '0' })
      expect(r.code, r.out).toBe(2)
      expect(r.out).toContain(`QUEUE_PREFIX "${pool.env.QUEUE_PREFIX}"`)
      expect(r.out).toContain('belongs to another deployment')
    }
  }, 120_000)

  it('refuses a copy of its engine on another host, naming DATA_DIR', async () => {
    const copy = mkdtempSync(path.join(os.tmpdir(), 'uds-engine-copy-'))
    dirs.push(copy)
    cpSync(path.join(pool.dataDir, 'clickhouse', 'metadata'), path.join(copy, 'clickhouse', 'metadata'), { recursive: true })
    const r = await runToEnd(['worker', 'track'], { DATABASE_URL: pool.env.DATABASE_URL, QUEUE_PREFIX: pool.env.QUEUE_PREFIX, DATA_DIR: copy })
    expect(r.code, r.out).toBe(2)
    expect(r.out).toContain(`DATA_DIR ${copy} holds a ClickHouse database`)
    expect(r.out).toContain('two engines would split its history')
  }, 120_000)

  it('fails a job for a workspace its database does not know, and never reports it done', async () => {
    const redis = new Redis(pool.env.REDIS_URL, { maxRetriesPerRequest: null })
    const layouts = await TrackLayouts.open(redis, pool.env.QUEUE_PREFIX, 4)
    const queues = new QueueRegistry(redis, pool.env.QUEUE_PREFIX, layouts)
    const tracker = new RequestTracker(redis, pool.env.QUEUE_PREFIX)
    try {
      const at = new Date().toISOString()
      const job = { workspaceId: 'ws-of-another-deployment', requestId: 'foreign-1', attributes: [], events: [{ index: 0, identifier: { kind: 'external_id' as const, value: 'u1' }, name: 'e', time: at, properties: '{}' }], purchases: [], subscriptionChanges: [], emailStateChanges: [] }
      await submitRequest({ queues, tracker }, { workspaceId: job.workspaceId, requestId: job.requestId, jobs: [{ name: 'applyTrackBatch', partition: 0, data: job }] })
      const progress = await until('the foreign job to finish', () => tracker.get('foreign-1', job.workspaceId), (p) => p?.status === 'done' || p?.status === 'failed', 60_000, 100)
      expect(progress).toMatchObject({ status: 'failed', errors: [{ message: "workspace ws-of-another-deployment is not in this deployment's database" }] })
    } finally {
      layouts.close()
      await queues.close()
      redis.disconnect()
    }
  }, 120_000)
})
