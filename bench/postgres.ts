// The benchmark's own Postgres: a cluster initdb'd into a directory of its own, on a port of its
// own, with settings a production server would have (autovacuum on at its defaults, shared
// buffers a quarter of a small host's memory), so figures do not depend on how the machine's
// Postgres happens to be configured. The directory outlives a run, so a preloaded database in it
// (bench/preload.ts) is found again by the next one. BENCH_PG=machine uses BENCH_DATABASE_URL
// (default the machine's 127.0.0.1:5432) instead.
//
// Usage alone: tsx bench/postgres.ts start|stop (prints the URL to set as BENCH_DATABASE_URL).
import { execFileSync, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const DIR = process.env.BENCH_PG_DIR ?? path.join(os.tmpdir(), 'uds-bench-pg')
const PORT = Number(process.env.BENCH_PG_PORT ?? 5499)
const DATA = path.join(DIR, 'data')

/**
 * Production-like, for a host of this size. Everything not named here is Postgres's default:
 * autovacuum on, its scale factors and cost limits untouched, synchronous commit, fsync.
 */
const SETTINGS: Record<string, string> = {
  listen_addresses: "'127.0.0.1'",
  port: String(PORT),
  unix_socket_directories: `'${DIR}'`,
  max_connections: '200',
  shared_buffers: "'2GB'",
  effective_cache_size: "'8GB'",
  work_mem: "'16MB'",
  maintenance_work_mem: "'256MB'",
  max_wal_size: "'4GB'",
  checkpoint_completion_target: '0.9',
  random_page_cost: '1.1',
  // Long autovacuum passes show in postgres.log beside the data directory.
  log_autovacuum_min_duration: "'10s'",
}

function binDir(): string {
  const versions = readdirSync('/usr/lib/postgresql')
    .filter((v) => existsSync(path.join('/usr/lib/postgresql', v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a))
  if (!versions.length) throw new Error('no initdb under /usr/lib/postgresql/*/bin: install postgresql or set BENCH_PG=machine')
  return path.join('/usr/lib/postgresql', versions[0], 'bin')
}

/** initdb and postgres refuse to run as root: then they run as the `postgres` system user. */
function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  return { uid, gid }
}

function run(bin: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(path.join(binDir(), bin), args, { ...owner(), encoding: 'utf8', cwd: '/' })
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` }
}

export function benchPostgresUrl(): string {
  return `postgres://${encodeURIComponent(os.userInfo().username)}@127.0.0.1:${PORT}/postgres`
}

function running(): boolean {
  return run('pg_ctl', ['status', '-D', DATA]).status === 0
}

/**
 * Starts the bench's cluster (created on first use), sets BENCH_DATABASE_URL for this process and
 * the parts it starts, and returns whether it was started here (so the caller stops it again).
 */
export async function startBenchPostgres(): Promise<{ url: string; startedHere: boolean }> {
  const url = benchPostgresUrl()
  process.env.BENCH_DATABASE_URL = url
  if (running()) return { url, startedHere: false }
  if (!existsSync(path.join(DATA, 'PG_VERSION'))) {
    mkdirSync(DATA, { recursive: true })
    const o = owner()
    if (o) {
      chownSync(DIR, o.uid, o.gid)
      chownSync(DATA, o.uid, o.gid)
    }
    // The superuser is named after this OS user, as the service connects (trust auth on loopback).
    const init = run('initdb', ['-D', DATA, '-U', os.userInfo().username, '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'])
    if (init.status !== 0) throw new Error(`initdb failed: ${init.out}`)
    const conf = Object.entries(SETTINGS).map(([k, v]) => `${k} = ${v}`).join('\n')
    writeFileSync(path.join(DATA, 'postgresql.bench.conf'), `${conf}\n`)
    writeFileSync(path.join(DATA, 'postgresql.conf'), "include 'postgresql.bench.conf'\n", { flag: 'a' })
    if (o) chownSync(path.join(DATA, 'postgresql.bench.conf'), o.uid, o.gid)
  }
  const start = run('pg_ctl', ['start', '-w', '-t', '120', '-D', DATA, '-l', path.join(DIR, 'postgres.log')])
  if (start.status !== 0) throw new Error(`pg_ctl start failed: ${start.out} (see ${path.join(DIR, 'postgres.log')})`)
  return { url, startedHere: true }
}

export function stopBenchPostgres(): void {
  if (running()) run('pg_ctl', ['stop', '-w', '-m', 'fast', '-D', DATA])
}

/** BENCH_PG=machine: the machine's Postgres at BENCH_DATABASE_URL; otherwise the bench's own. */
export const ownPostgres = process.env.BENCH_PG !== 'machine'

/** The bench's own server's postmaster, for metering its CPU (undefined on the machine's server). */
export function benchPostmasterPid(): number | undefined {
  if (!ownPostgres) return undefined
  try {
    return Number(readFileSync(path.join(DATA, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined
  } catch {
    return undefined
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.dirname, 'postgres.ts')) {
  if (process.argv[2] === 'stop') stopBenchPostgres()
  else
    startBenchPostgres().then(
      (s) => console.log(s.url),
      (e) => {
        console.error(e)
        process.exit(1)
      },
    )
}
