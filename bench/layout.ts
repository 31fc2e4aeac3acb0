// The two process layouts the benchmarks run the service in, on the preloaded database:
// embedded (one process, every role) and split (one API process and one worker process at a
// lower CPU priority: the layout `make run` starts, bin/run-local.ts).
import { workerPriority } from '../bin/process-flags.js'
import { dropQueueKeys, startService, stopService, type ServiceProcess } from './lib.js'

export interface Layout {
  mode: 'embedded' | 'split'
  apis: string[]
  /** The service's processes by role (embedded: one process, as `api`), for metering their CPU. */
  pids(): { api: number[]; worker: number[] }
  /** Split only: stops the worker process (SIGTERM, it finishes its active jobs), or starts it again. */
  stopWorker(): Promise<void>
  startWorker(): Promise<void>
  stop(): Promise<void>
}

export async function startLayout(mode: 'embedded' | 'split', env: Record<string, string>): Promise<Layout> {
  const apis: ServiceProcess[] = []
  let worker: ServiceProcess | undefined
  const startWorker = async () => {
    worker = await startService(['worker'], env, { priority: workerPriority() })
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
    pids: () => ({ api: apis.map((a) => a.child.pid!), worker: worker ? [worker.child.pid!] : [] }),
    async stopWorker() {
      if (!worker) throw new Error('no worker process in the embedded layout')
      await stopService(worker)
    },
    async startWorker() {
      if (mode === 'embedded') throw new Error('no worker process in the embedded layout')
      await startWorker()
    },
    async stop() {
      for (const a of apis) await stopService(a)
      if (worker) await stopService(worker)
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
