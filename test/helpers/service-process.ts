import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { SERVICE_NODE_FLAGS, serviceProcessEnv } from '../../bin/process-flags.js'
import { createTestDatabase, dbUrl, dropTestDatabase, request, type HttpResult } from './harness.js'
import { freePort } from './ports.js'
import { until } from './wait.js'

const root = path.resolve(import.meta.dirname, '../..')

/** What `make run` prints and writes on a first start (operator.md section 1). */
export interface FirstStartCredentials {
  workspace_id: string
  api_key: string
  scim_token: string
  scim_request_origin: string
}

/** The service started as users start it, in processes of its own, on a test database and queue prefix. */
export interface ServiceProcesses {
  /** One base URL per API process. */
  apis: string[]
  adminToken: string
  credentials: FirstStartCredentials
  dataDir: string
  /** Everything the processes wrote, for a failing test to show. */
  output(): string
  /** Sends a signal to the process of that role (the worker, or the `make run` supervisor's children). */
  signal(role: 'worker', signal: NodeJS.Signals): void
  stop(): Promise<void>
}

/** The scaled layout with a pool of worker processes, each of which can be killed and started again. */
export interface WorkerPool extends ServiceProcesses {
  env: ServiceEnv & { REDIS_URL: string }
  /** The worker processes, by index (a restarted one replaces its entry). */
  workers: ChildProcess[]
  /** Each worker's METRICS_PORT (its objects applied are read there). */
  metricsPorts: number[]
  /** Starts worker `i` again (after a kill), on the same DATA_DIR and METRICS_PORT as before. */
  restart(i: number): ChildProcess
}

export interface ServiceEnv {
  DATABASE_URL: string
  DATA_DIR: string
  QUEUE_PREFIX: string
}

async function testServiceEnv(): Promise<{ env: ServiceEnv; dbName: string }> {
  const dbName = await createTestDatabase()
  return {
    dbName,
    env: {
      DATABASE_URL: dbUrl(dbName),
      DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'uds-layout-')),
      QUEUE_PREFIX: `udslayout_${randomBytes(5).toString('hex')}`,
    },
  }
}

function baseEnv(env: ServiceEnv, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    LOG_LEVEL: 'warn',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED,
    // Export callbacks go to the test's own loopback server.
    CALLBACK_ALLOW_PRIVATE: 'true',
    ...env,
    ...extra,
  }
}

function collect(children: ChildProcess[]): () => string {
  let out = ''
  for (const c of children) {
    c.stdout?.on('data', (d) => (out += d))
    c.stderr?.on('data', (d) => (out += d))
  }
  return () => out
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

async function ready(baseUrl: string, output: () => string): Promise<void> {
  try {
    await until(
      `the API at ${baseUrl} to be ready`,
      () => request(baseUrl, 'GET', '/readyz').catch(() => undefined),
      (r): r is HttpResult => r?.status === 200,
      90_000,
      200,
    )
  } catch (e) {
    throw new Error(`${(e as Error).message}\n--- service output ---\n${output()}`)
  }
}

/**
 * `make run`'s layout exactly: `npm start`'s command (`node --import tsx bin/run-local.ts`), which
 * supervises one API process and one worker process in the idle scheduling class; first-start credentials and
 * the generated admin token read from DATA_DIR as a user would.
 */
export async function startMakeRun(extra: Record<string, string> = {}): Promise<ServiceProcesses> {
  const { env, dbName } = await testServiceEnv()
  const port = await freePort()
  const supervisor = spawn(process.execPath, ['--import', 'tsx', 'bin/run-local.ts'], {
    cwd: root,
    env: baseEnv(env, { PORT: String(port), ...extra }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output = collect([supervisor])
  const baseUrl = `http://127.0.0.1:${port}`
  await ready(baseUrl, output)
  const credentials = JSON.parse(readFileSync(path.join(env.DATA_DIR, 'credentials.json'), 'utf8')) as FirstStartCredentials
  const adminToken = readFileSync(path.join(env.DATA_DIR, 'admin-token'), 'utf8').trim()
  return {
    apis: [baseUrl],
    adminToken,
    credentials,
    dataDir: env.DATA_DIR,
    output,
    signal(_role, signal) {
      const pid = Number(readFileSync(path.join(env.DATA_DIR, 'clickhouse', 'owner.pid'), 'utf8'))
      process.kill(pid, signal)
    },
    async stop() {
      supervisor.kill('SIGTERM')
      await exited(supervisor)
      await cleanUp(env, dbName)
    },
  }
}

/**
 * The README's scaled mode: `apiCount` processes of `npm run start:api` beside one of `npm run
 * start:worker` (the command line and environment bin/start.ts gives them, without the launcher in
 * between, so that a signal reaches the service process itself), one ADMIN_TOKEN set for all as an
 * operator would.
 */
export async function startScaled(apiCount: number, extra: Record<string, string> = {}): Promise<ServiceProcesses> {
  const { env, dbName } = await testServiceEnv()
  const adminToken = `layout-admin-${randomBytes(12).toString('hex')}`
  const shared = { ADMIN_TOKEN: adminToken, ...extra }
  const node = (role: string, port?: number) =>
    spawn(process.execPath, [...SERVICE_NODE_FLAGS, '--import', 'tsx', 'bin/main.ts', role], {
      cwd: root,
      env: serviceProcessEnv(baseEnv(env, { ...shared, ...(port ? { PORT: String(port) } : {}) })),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  const worker = node('worker')
  const ports = await Promise.all(Array.from({ length: apiCount }, () => freePort()))
  const apis = ports.map((p) => node('api', p))
  const children = [worker, ...apis]
  const output = collect(children)
  const urls = ports.map((p) => `http://127.0.0.1:${p}`)
  await Promise.all(urls.map((u) => ready(u, output)))
  const credentials = JSON.parse(readFileSync(path.join(env.DATA_DIR, 'credentials.json'), 'utf8')) as FirstStartCredentials
  return {
    apis: urls,
    adminToken,
    credentials,
    dataDir: env.DATA_DIR,
    output,
    signal(_role, signal) {
      worker.kill(signal)
    },
    async stop() {
      for (const c of children) c.kill('SIGTERM')
      await Promise.all(children.map(exited))
      await cleanUp(env, dbName)
    },
  }
}

/**
 * The README's scaled mode with a pool: one API process and `workers.length` worker processes
 * (`npm run start:worker`'s command line), each on the DATA_DIR it names (default: the pool's own),
 * all with the same database, Redis prefix and admin token.
 */
export async function startWorkerPool(opts: { workers: { dataDir?: string; roles?: string[] }[]; env?: Record<string, string> }): Promise<WorkerPool> {
  const { env, dbName } = await testServiceEnv()
  const adminToken = `pool-admin-${randomBytes(12).toString('hex')}`
  const shared = { ADMIN_TOKEN: adminToken, ...(opts.env ?? {}) }
  const node = (args: string[], extra: Record<string, string>) =>
    spawn(process.execPath, [...SERVICE_NODE_FLAGS, '--import', 'tsx', 'bin/main.ts', ...args], {
      cwd: root,
      env: serviceProcessEnv(baseEnv(env, { ...shared, ...extra })),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  const port = await freePort()
  const api = node(['api'], { PORT: String(port) })
  const metricsPorts = await Promise.all(opts.workers.map(() => freePort()))
  let out = ''
  const watch = (c: ChildProcess) => {
    c.stdout?.on('data', (d) => (out += d))
    c.stderr?.on('data', (d) => (out += d))
    return c
  }
  const startWorker = (i: number) =>
    watch(node(['worker', ...(opts.workers[i].roles ?? [])], { DATA_DIR: opts.workers[i].dataDir ?? env.DATA_DIR, METRICS_PORT: String(metricsPorts[i]), HOST: '127.0.0.1' }))
  watch(api)
  const output = () => out
  const workerReady = (p: number) =>
    until(`worker metrics on ${p}`, () => fetch(`http://127.0.0.1:${p}/metrics`).then((r) => r.status, () => 0), (s) => s === 200, 90_000, 200)
  // The first worker first: a new deployment's engine is made where a worker first starts.
  const workers = [startWorker(0)]
  await workerReady(metricsPorts[0])
  for (let i = 1; i < opts.workers.length; i++) workers.push(startWorker(i))
  const url = `http://127.0.0.1:${port}`
  await ready(url, output)
  await Promise.all(metricsPorts.map(workerReady))
  const credentials = JSON.parse(readFileSync(path.join(env.DATA_DIR, 'credentials.json'), 'utf8')) as FirstStartCredentials
  return {
    apis: [url],
    adminToken,
    credentials,
    dataDir: env.DATA_DIR,
    env: { ...env, REDIS_URL: baseEnv(env, {}).REDIS_URL as string },
    workers,
    metricsPorts,
    output,
    signal(_role, signal) {
      workers[0].kill(signal)
    },
    restart(i) {
      workers[i] = startWorker(i)
      return workers[i]
    },
    async stop() {
      const all = [api, ...workers]
      for (const c of all) c.kill('SIGTERM')
      await Promise.all(all.map(exited))
      await cleanUp(env, dbName)
      for (const w of opts.workers) if (w.dataDir) rmSync(w.dataDir, { recursive: true, force: true })
    },
  }
}

async function cleanUp(env: ServiceEnv, dbName: string): Promise<void> {
  await dropTestDatabase(dbName)
  rmSync(env.DATA_DIR, { recursive: true, force: true })
}
