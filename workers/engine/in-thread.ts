import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { Logger } from '../../shared/logger.js'
import type { Served } from './pop-loop.js'
import type { ReadPriority } from './priority.js'

export interface EngineThreadData {
  redisUrl: string
  prefix: string
  dataDir: string
  database: string
  logLevel: string
  /** The holder key's value for this seat (heartbeat.ts), already taken by the main thread. */
  holder: string
  seat: string
}

export type EngineThreadMessage = { type: 'ready' } | { type: 'begin' } | { type: 'end' } | { type: 'lost' } | { type: 'stopped' }

/** The thread's entry, beside this file and in its language (TypeScript run through tsx, or built JavaScript). */
const here = fileURLToPath(import.meta.url)
const entry = new URL(`./thread${path.extname(here)}`, import.meta.url).href
const bootstrap =
  path.extname(here) === '.ts'
    ? `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}) })`
    : `import(${JSON.stringify(entry)})`

/**
 * The engine holder's thread (thread.ts): it keeps the holder's heartbeat, serves the API
 * processes' ClickHouse reads (reads.ts) and the statements of engine-less worker processes
 * (statements.ts), on connections of its own to the engine this process holds. On the main
 * thread a read waited for whatever held its event loop: a batch's synchronous stretch or a garbage
 * collection of the batches' heap, up to 100-250 ms each while a backlog drains. The thread tells
 * the main thread when a read runs, so batches still hold back meanwhile (`priority`).
 */
export async function serveEngineInThread(opts: { data: EngineThreadData; priority: ReadPriority; logger: Logger }): Promise<Served> {
  const { priority, logger } = opts
  const worker = new Worker(bootstrap, { eval: true, workerData: opts.data })
  let running = 0
  let stopping = false
  worker.on('message', (m: EngineThreadMessage) => {
    if (m.type === 'begin') {
      running++
      priority.begin()
    } else if (m.type === 'end' && running > 0) {
      running--
      priority.end()
    } else if (m.type === 'lost') {
      logger.error('another process holds the embedded engine\'s heartbeat: two engines claim one deployment (is a copy of DATA_DIR in use on another host?)')
    }
  })
  worker.on('error', (e) => logger.error({ err: e }, 'the engine thread failed; ClickHouse reads and engine-less workers wait until the worker restarts'))
  worker.on('exit', () => {
    // Reads the thread began and never ended hold no batch back.
    for (; running > 0; running--) priority.end()
    if (!stopping) logger.error('the engine thread stopped')
  })
  const ready = new Promise<void>((resolve, reject) => {
    worker.on('message', (m: EngineThreadMessage) => m.type === 'ready' && resolve())
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the engine thread exited (code ${code}) before it was ready`)))
  })
  await ready
  const stopped = new Promise<void>((resolve) => {
    worker.on('message', (m: EngineThreadMessage) => m.type === 'stopped' && resolve())
    worker.once('exit', () => resolve())
  })
  return {
    async stop() {
      if (!stopping) worker.postMessage('stop')
      stopping = true
      await stopped
      // The idle thread must not keep the process alive (thread.ts says why it stays).
      worker.unref()
    },
  }
}
