// The two process layouts the benchmarks run the service in, on the preloaded database:
// embedded (one process, every role) and split (one API process and BENCH_WORKERS worker
// processes, default one, at a lower CPU priority: with one, the layout `make run` starts,
// bin/run-local.ts; with more, the README's scaled mode on one host, one of them holding the engine).
import { workerPriority } from '../bin/process-flags.js'
import { dropQueueKeys, startService, stopService, type ServiceProcess } from './lib.js'

export interface Layout {
  mode: 'embedded' | 'split'
  apis: string[]
  /** The service's processes by role (embedded: one process, as `api`), for metering their CPU. */
  pids(): { api: number[]; worker: number[] }
  /** Split only: stops the worker processes (SIGTERM, they finish their active jobs), or starts them again. */
  stopWorker(): Promise<void>
  startWorker(): Promise<void>
  stop(): Promise<void>
}

/** Worker processes of the split layout. */
export const benchWorkers = () => Math.max(1, Number(process.env.BENCH_WORKERS ?? 1))

export async function startLayout(mode: 'embedded' | 'split', env: Record<string, string>): Promise<Layout> {
  const apis: ServiceProcess[] = []
  let workers: ServiceProcess[] = []
  const startWorker = async () => {
    // The first holds the engine; the others start once it does, so they find it held.
    workers = [await startService(['worker'], env, { priority: workerPriority() })]
    for (let i = 1; i < benchWorkers(); i++) workers.push(await startService(['worker'], env, { priority: workerPriority() }))
  }
  if (mode === 'embedded') {
    apis.push(await startService([], env))
  } else {
    await startWorker()
    apis.push(await startService(['api'], env))
  }
  return {
    mode,
    apis: apis.map((a) => a.url),
    pids: () => ({ api: apis.map((a) => a.child.pid!), worker: workers.map((w) => w.child.pid!) }),
    async stopWorker() {
      if (!workers.length) throw new Error('no worker process in the embedded layout')
      await Promise.all(workers.map(stopService))
    },
    async startWorker() {
      if (mode === 'embedded') throw new Error('no worker process in the embedded layout')
      await startWorker()
    },
    async stop() {
      for (const a of apis) await stopService(a)
      await Promise.all(workers.map(stopService))
    },
  }
}

/** Runs `fn` on a layout started for it, then stops the layout and drops its queues' keys, whatever `fn` did. */
export async function withLayout<T>(mode: 'embedded' | 'split', env: Record<string, string>, fn: (layout: Layout) => Promise<T>): Promise<T> {
  const layout = await startLayout(mode, env)
  try {
    return await fn(layout)
  } finally {
    await layout.stop()
    await dropQueueKeys(env.QUEUE_PREFIX)
  }
}
