import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { freePort } from '../../helpers/ports.js'
import { until } from '../../helpers/wait.js'
import { exited, spawnWorkerProcess } from '../../helpers/worker-process.js'

const ROOT = path.resolve(import.meta.dirname, '../../..')

let env: TestEnv
let dataDir: string
const spawned: ChildProcess[] = []
const pids: number[] = []

beforeAll(async () => {
  env = await startTestEnv({ engine: false })
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-engine-lock-'))
})
afterAll(async () => {
  for (const child of spawned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }
  await env?.close()
  rmSync(dataDir, { recursive: true, force: true })
})


/** A worker's METRICS_PORT listener opens only after it holds the engine and started its workers. */
async function ready(port: number, child?: ChildProcess): Promise<void> {
  await until(
    `the worker on port ${port}`,
    async () => {
      if (child && (child.exitCode !== null || child.signalCode !== null)) throw new Error(`worker exited with ${child.exitCode ?? child.signalCode}`)
      return fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.status, () => 0)
    },
    (s) => s === 200,
    // Start-up (tsx, chDB, migrations) on a busy shared machine; a refused start fails at once above.
    120_000,
  )
}

/** A `main.ts worker track` on the shared DATA_DIR, answering /metrics on a port of its own once ready. */
async function startWorker(): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort()
  const child = spawnWorkerProcess(env, dataDir, ['track'], { METRICS_PORT: String(port), HOST: '127.0.0.1' })
  spawned.push(child)
  return { child, port }
}

/** A worker spawned with its stderr kept, or (`orphanable`) under a shell that never reaps it once it dies. */
function spawnCaptured(port: number, orphanable = false): { child: ChildProcess; stderr: () => string } {
  const args = ['--import', 'tsx', 'bin/main.ts', 'worker', 'track']
  const child = orphanable
    ? // The shell execs into sleep, which never waits for its child: a killed worker stays a zombie.
      spawn('sh', ['-c', '"$0" "$@" & echo $!; exec sleep 120', process.execPath, ...args], { cwd: ROOT, env: workerEnv(port) })
    : spawn(process.execPath, args, { cwd: ROOT, env: workerEnv(port) })
  spawned.push(child)
  let err = ''
  child.stderr!.on('data', (d) => (err += d))
  return { child, stderr: () => err }
}

const workerEnv = (port: number) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
  DATABASE_URL: env.config.DATABASE_URL,
  REDIS_URL: env.config.REDIS_URL,
  QUEUE_PREFIX: env.config.QUEUE_PREFIX,
  DATA_DIR: dataDir,
  LOG_LEVEL: 'error',
  METRICS_PORT: String(port),
  HOST: '127.0.0.1',
})

function processState(pid: number): string | undefined {
  try {
    // The state letter follows the parenthesised command name.
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0]
  } catch {
    return undefined
  }
}

const owner = () => readFileSync(path.join(dataDir, 'clickhouse', 'owner.pid'), 'utf8')

describe('the embedded engine lock', () => {
  it('lets a worker killed with SIGKILL be restarted at once on the same DATA_DIR, again and again', async () => {
    let w = await startWorker()
    await ready(w.port, w.child)
    for (let round = 0; round < 4; round++) {
      w.child.kill('SIGKILL')
      await exited(w.child)
      w = await startWorker()
      // Refused (exit 2, as a pid-file lock could be) would fail here at once.
      await ready(w.port, w.child)
      expect(w.child.exitCode).toBeNull()
      expect(owner()).toBe(String(w.child.pid))
    }

    // A second live process on the same directory never opens it beside the holder: it stands by,
    // working through the holder, and takes the engine over once the holder is gone.
    const second = await startWorker()
    await ready(second.port, second.child)
    expect(owner()).toBe(String(w.child.pid))
    expect(w.child.exitCode).toBeNull()
    w.child.kill('SIGKILL')
    await exited(w.child)
    await until('the standby to take the engine over', owner, (o) => o === String(second.child.pid), 30_000)

    second.child.kill('SIGTERM')
    expect(await exited(second.child)).toBe(0)
  }, 600_000)

  it('starts beside a killed holder that was never reaped (its pid still exists as a zombie)', async () => {
    const holderPort = await freePort()
    const shell = spawnCaptured(holderPort, true)
    const [line] = (await once(shell.child.stdout!, 'data')) as [Buffer]
    const holderPid = Number(line.toString().trim())
    pids.push(holderPid)
    await ready(holderPort)
    expect(owner()).toBe(String(holderPid))

    process.kill(holderPid, 'SIGKILL')
    await until('the killed holder to become a zombie', () => processState(holderPid), (s) => s === 'Z', 10_000)
    // The pid is still taken (a pid-file lock would call it alive), yet the kernel dropped its flock.
    expect(() => process.kill(holderPid, 0)).not.toThrow()

    const w = await startWorker()
    await ready(w.port, w.child)
    expect(owner()).toBe(String(w.child.pid))
    w.child.kill('SIGTERM')
    expect(await exited(w.child)).toBe(0)
    shell.child.kill('SIGKILL')
  }, 300_000)
})
