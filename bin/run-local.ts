/**
 * `make run` / `npm start`: the API and the workers as two processes of one machine, so the API
 * keeps answering while the workers are saturated. The worker process runs at a lower CPU priority
 * (the idle scheduling class, `workerPriority`): the scheduler gives the API the cores whenever it has work. The API needs no
 * ClickHouse; the worker holds the embedded engine (its flock dies with it, so a restart is
 * immediate). The worker starts first and the API once the worker is ready, so the service says
 * "ready" only when both answer. A child that dies unexpectedly is restarted after a short back-off;
 * SIGINT/SIGTERM are passed on and the supervisor exits once both children have.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { ConfigError, loadConfig } from '../shared/config.js'
import { createLogger } from '../shared/logger.js'
import { serviceCommand, serviceProcessEnv, workerPriority } from './process-flags.js'

const FIRST_BACKOFF_MS = 500
const MAX_BACKOFF_MS = 30_000
/** A child that ran this long had started well: its next failure is not counted against it. */
const STEADY_MS = 30_000
/** Failing this often in a row, each time before STEADY_MS, is a fault a restart cannot fix. */
const MAX_QUICK_FAILURES = 5
/** main.ts's own 15 s shutdown grace, and a margin. */
const SHUTDOWN_GRACE_MS = 20_000
/** main.ts exits 2 for a bad configuration or settings of two deployments: restarting repeats it. */
const EXIT_FATAL = 2

interface Child {
  role: 'api' | 'worker'
  env: NodeJS.ProcessEnv
  /** The command the process is started under (its CPU priority); none for the API. */
  priority: string[]
  proc?: ChildProcess
  startedAt: number
  quickFailures: number
  restartTimer?: NodeJS.Timeout
}

function main() {
  let config
  try {
    // Checked once here, so a bad variable is reported once rather than by both children.
    config = loadConfig()
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e
    console.error(e.message)
    process.exit(EXIT_FATAL)
  }
  const logger = createLogger(config.LOG_LEVEL)

  // The API serves /metrics itself (with auth); a METRICS_PORT listener belongs to the worker alone.
  const apiEnv = serviceProcessEnv(process.env)
  delete apiEnv.METRICS_PORT
  const children: Child[] = [
    { role: 'api', env: apiEnv, priority: [], startedAt: 0, quickFailures: 0 },
    { role: 'worker', env: serviceProcessEnv(process.env), priority: workerPriority(), startedAt: 0, quickFailures: 0 },
  ]
  let stopping = false
  let exitCode = 0

  const start = (c: Child) => {
    const [cmd, ...args] = [...c.priority, ...serviceCommand([c.role])]
    // The IPC channel carries the child's word that it is ready (main.ts).
    const proc = spawn(cmd, args, { env: c.env, stdio: ['pipe', 'inherit', 'inherit', 'ipc'] })
    c.proc = proc
    c.startedAt = Date.now()
    proc.on('message', (m: { type?: string }) => m?.type === 'ready' && ready(c))
    proc.on('error', (e) => logger.error({ role: c.role, err: e }, 'could not start the process'))
    proc.on('close', (code, signal) => exited(c, proc, code, signal))
    logger.info({ role: c.role, pid: proc.pid, priority: c.priority.join(' ') || 'default' }, 'process started')
  }

  const exited = (c: Child, proc: ChildProcess, code: number | null, signal: NodeJS.Signals | null) => {
    if (c.proc !== proc) return
    c.proc = undefined
    if (stopping) {
      if (code !== 0) exitCode = exitCode || 1
      return finishIfDone()
    }
    if (code === EXIT_FATAL) {
      logger.error({ role: c.role }, 'process refused to start (see its message above); stopping')
      return stop('SIGTERM', EXIT_FATAL)
    }
    const ranMs = Date.now() - c.startedAt
    c.quickFailures = ranMs >= STEADY_MS ? 1 : c.quickFailures + 1
    if (c.quickFailures >= MAX_QUICK_FAILURES) {
      logger.error({ role: c.role, code, signal, failures: c.quickFailures }, 'process keeps dying at start; giving up')
      return stop('SIGTERM', 1)
    }
    const delay = Math.min(FIRST_BACKOFF_MS * 2 ** (c.quickFailures - 1), MAX_BACKOFF_MS)
    logger.warn({ role: c.role, code, signal, restart_in_ms: delay }, 'process exited unexpectedly; restarting')
    c.restartTimer = setTimeout(() => start(c), delay)
  }

  const finishIfDone = () => {
    if (children.every((c) => !c.proc)) process.exit(exitCode)
  }

  const stop = (signal: NodeJS.Signals, code: number) => {
    if (!stopping) {
      stopping = true
      exitCode = code
      setTimeout(() => {
        logger.warn('children still running after the grace period; killing them')
        for (const c of children) c.proc?.kill('SIGKILL')
      }, SHUTDOWN_GRACE_MS).unref()
    }
    for (const c of children) {
      clearTimeout(c.restartTimer)
      c.proc?.kill(signal)
    }
    finishIfDone()
  }

  // The worker first, the API once the worker holds the engine, and the ready line once the API
  // listens: a read sent as soon as "ready" shows is answered, not told that no worker holds the engine.
  let announced = false
  const ready = (c: Child) => {
    if (c.role === 'worker' && !api.proc && !api.restartTimer) return start(api)
    if (c.role === 'api' && !announced) {
      announced = true
      clearTimeout(slow)
      console.log(`ready: ${config.PUBLIC_URL} (API and worker answer; Ctrl-C stops both)`)
    }
  }
  const [api, worker] = children
  const slow = setTimeout(() => logger.warn('still starting: the API starts once the worker holds the embedded engine (see the worker\'s messages above)'), 30_000)
  slow.unref()

  process.on('SIGINT', () => stop('SIGINT', 0))
  process.on('SIGTERM', () => stop('SIGTERM', 0))
  start(worker)
}

main()
