import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import pg from 'pg'
import { SERVICE_NODE_FLAGS, serviceProcessEnv } from '../bin/process-flags.js'
import { withDefaultUser } from '../shared/db/pool.js'

export const root = path.resolve(import.meta.dirname, '..')
/** The tree whose service the parts start: another checkout (BENCH_SERVICE_ROOT) measures its code under this bench. */
const serviceRoot = process.env.BENCH_SERVICE_ROOT ? path.resolve(process.env.BENCH_SERVICE_ROOT) : root
/** Read at each call: `make bench` sets it once it has started its own Postgres (bench/postgres.ts). */
export const pgBase = () => process.env.BENCH_DATABASE_URL ?? 'postgres://127.0.0.1:5432/postgres'

export function dbUrl(name: string): string {
  const u = new URL(pgBase())
  u.pathname = `/${name}`
  return withDefaultUser(u.toString())
}

/** A fresh benchmark database, so runs never touch `make run`'s data or each other's. */
export async function freshDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: dbUrl('postgres') })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`)
  await admin.end()
  return dbUrl(name)
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

export interface ServiceProcess {
  child: ChildProcess
  url: string
}

// Variables the benchmark sets for each service it starts; the rest of its environment passes
// through, so `TRACK_PARTITIONS=2 make bench` (or a backlog bound) reaches the services.
const BENCH_OWNED = ['DATABASE_URL', 'DATA_DIR', 'QUEUE_PREFIX', 'PORT', 'METRICS_PORT', 'HOST', 'PUBLIC_URL', 'ADMIN_TOKEN', 'CLICKHOUSE_URL']

/** A port nobody listens on now: fixed ports let two runs on one machine probe each other's services. */
async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * A service process's standard output: a file, as a deployment's log collector would take it (a
 * pipe this process had to read would cost the bench's own loop and could fill and hold the
 * service's writes). In BENCH_SERVICE_LOGS, named <role>-<pid>.log, or else in a directory removed
 * when this process exits.
 */
let logDir: string | undefined
function serviceLog(): { fd: number; named(name: string): string } {
  if (!logDir) {
    logDir = process.env.BENCH_SERVICE_LOGS ?? tempDir('uds-bench-logs-')
    const own = logDir
    if (!process.env.BENCH_SERVICE_LOGS) process.once('exit', () => rmSync(own, { recursive: true, force: true }))
  }
  const dir = logDir
  const opened = path.join(dir, `starting-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.log`)
  const fd = openSync(opened, 'a')
  return {
    fd,
    named(name) {
      // The child holds its own copy of the descriptor.
      closeSync(fd)
      const file = path.join(dir, name)
      renameSync(opened, file)
      return file
    },
  }
}

/**
 * Starts `bin/main.ts <args>` and waits until its API (or, for a worker, its metrics listener)
 * answers. `priority` is a command to start it under, as `make run` starts its worker (`workerPriority`).
 */
export async function startService(args: string[], env: Record<string, string>, opts: { priority?: string[] } = {}): Promise<ServiceProcess> {
  const port = await freePort()
  const log = serviceLog()
  const workerOnly = args[0] === 'worker'
  // BENCH_CPU_PROF: a CPU profile per service process; BENCH_NODE_FLAGS: more flags for them, after
  // the service's own so that they can override one (bench/allocation-profile.mjs).
  const flags = [
    ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
    ...SERVICE_NODE_FLAGS,
    ...(process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []),
  ]
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !BENCH_OWNED.includes(k)))
  const command = [process.execPath, ...flags, '--import', 'tsx', 'bin/main.ts', ...args]
  const [file, ...argv] = [...(opts.priority ?? []), ...command]
  const child = spawn(file, argv, {
    cwd: serviceRoot,
    // BENCH_BARE_ALLOCATOR=1: the allocators' own defaults, to measure SERVICE_ALLOCATOR_ENV against.
    // LOG_LEVEL passes through like the rest: unset, the services log at their default, as `make run`'s do.
    env: {
      ...(process.env.BENCH_BARE_ALLOCATOR ? inherited : serviceProcessEnv(inherited)),
      ...env,
      ...(workerOnly ? { METRICS_PORT: String(port) } : { PORT: String(port) }),
    },
    stdio: ['ignore', log.fd, 'inherit'],
  })
  const logFile = log.named(`${args[0] ?? 'all'}-${child.pid}.log`)
  const url = `http://127.0.0.1:${port}`
  const probe = workerOnly ? `${url}/metrics` : `${url}/healthz`
  const deadline = Date.now() + 120_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service ${args.join(' ')} exited: ${readFileSync(logFile, 'utf8').slice(-4000)}`)
    if (await fetch(probe).then((r) => r.ok).catch(() => false)) break
    if (Date.now() > deadline) throw new Error(`service ${args.join(' ')} did not start`)
    await sleep(100)
  }
  return { child, url }
}

export async function stopService(s: ServiceProcess): Promise<void> {
  if (s.child.exitCode !== null) return
  const done = new Promise((r) => s.child.once('exit', r))
  s.child.kill('SIGTERM')
  await done
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** The item whose instant (ms, performance.now() or after a start) is nearest `ms`. */
export function nearest<T>(items: T[], msOf: (item: T) => number, ms: number): T {
  return items.reduce((best, x) => (Math.abs(msOf(x) - ms) < Math.abs(msOf(best) - ms) ? x : best), items[0])
}

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix))
}

export function credentials(dataDir: string): { api_key: string; workspace_id: string } {
  return JSON.parse(readFileSync(path.join(dataDir, 'credentials.json'), 'utf8'))
}

export function adminToken(dataDir: string): string {
  return readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
}

/** Runs `count` async tasks with at most `concurrency` in flight. */
export async function pool<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const i = next++
        results[i] = await task(i)
      }
    }),
  )
  return results
}

/** Peak resident set size of this process so far, in MiB (Linux VmHWM). */
export function peakRssMb(pid: number | 'self' = 'self'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const m = /VmHWM:\s+(\d+) kB/.exec(status)
  return m ? Math.round(Number(m[1]) / 1024) : 0
}

/** The last line of a child's stdout as JSON: how bench parts report. */
export async function runPart(script: string, args: string[] = [], env: Record<string, string> = {}): Promise<unknown> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  const code = await new Promise((r) => child.once('exit', r))
  if (code !== 0) throw new Error(`${script} failed (${code}): ${out.slice(-2000)}`)
  const lines = out.trim().split('\n')
  return JSON.parse(lines[lines.length - 1])
}

/** Deletes a run's queues and request entries, so repeated benchmarks do not fill Redis. */
export async function dropQueueKeys(prefix: string): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      if ((keys as string[]).length) await redis.unlink(...(keys as string[]))
    }
  } finally {
    redis.disconnect()
  }
}
