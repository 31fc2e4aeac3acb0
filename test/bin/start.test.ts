import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { SERVICE_ALLOCATOR_ENV, SERVICE_NODE_FLAGS } from '../../bin/process-flags.js'
import { createTestDatabase, dbUrl, dropTestDatabase } from '../helpers/harness.js'
import { freePort } from '../helpers/ports.js'
import { alive, childPids } from '../helpers/proc.js'
import { until } from '../helpers/wait.js'
import { exited } from '../helpers/worker-process.js'

const ROOT = path.resolve(import.meta.dirname, '../..')
const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanups) await c()
})

interface Launched {
  proc: ChildProcess
  url: string
  output: () => string
  /** The launcher's child running `main.ts api`. */
  service: () => number | undefined
}

/** `npm run start:api`'s command, on a database, DATA_DIR and queue prefix of its own. */
async function startApi(env: Record<string, string> = {}): Promise<Launched> {
  const dbName = await createTestDatabase()
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-start-'))
  const port = await freePort()
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts', 'api'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATABASE_URL: dbUrl(dbName),
      REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
      QUEUE_PREFIX: `udsstart_${randomBytes(5).toString('hex')}`,
      DATA_DIR: dataDir,
      ADMIN_TOKEN: `start-admin-${randomBytes(12).toString('hex')}`,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  proc.stdout!.on('data', (d) => (out += d))
  proc.stderr!.on('data', (d) => (out += d))
  const service = () =>
    childPids(proc.pid!).find((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main.ts\0api')
      } catch {
        return false
      }
    })
  cleanups.push(async () => {
    const pid = service()
    if (pid) process.kill(pid, 'SIGKILL')
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    await dropTestDatabase(dbName).catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  })
  return { proc, url: `http://127.0.0.1:${port}`, output: () => out, service }
}

const environOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')

describe('bin/start.ts (npm run start:api / start:worker)', () => {
  it('starts the service process with the Node flags and allocator settings, and stops it on SIGTERM', async () => {
    const launched = await startApi()
    const health = await until(
      'the API to answer',
      () => fetch(`${launched.url}/healthz`).then((r) => r.status, () => 0),
      (s) => s === 200 || launched.proc.exitCode !== null,
      90_000,
    )
    expect(health, launched.output()).toBe(200)
    const pid = launched.service()!
    expect(pid).toBeGreaterThan(0)
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toEqual(expect.arrayContaining(SERVICE_NODE_FLAGS))
    // glibc splits the tunables it has read at their colons, so each part is looked for on its own.
    const environ = environOf(pid)
    for (const [name, value] of Object.entries(SERVICE_ALLOCATOR_ENV)) {
      expect(environ.some((entry) => entry.startsWith(`${name}=`))).toBe(true)
      for (const part of value.split(':')) expect(environ.join('\0')).toContain(part)
    }

    launched.proc.kill('SIGTERM')
    expect(await exited(launched.proc)).toBe(0)
    await until('the service process to stop', () => alive(pid), (a) => !a, 20_000)
  }, 150_000)

  it("keeps an operator's own allocator settings", async () => {
    const launched = await startApi({ JE_MALLOC_CONF: 'dirty_decay_ms:1000' })
    const pid = await until('the service process', () => launched.service(), (p) => p !== undefined, 30_000)
    expect(environOf(pid!)).toContain('JE_MALLOC_CONF=dirty_decay_ms:1000')
    expect(environOf(pid!).some((entry) => entry.startsWith('GLIBC_TUNABLES='))).toBe(true)
  }, 60_000)

  it("returns the service's exit code: a bad variable exits 2", async () => {
    const launched = await startApi({ PORT: 'abc' })
    expect(await exited(launched.proc)).toBe(2)
    expect(launched.output()).toMatch(/PORT/)
  }, 60_000)
})
