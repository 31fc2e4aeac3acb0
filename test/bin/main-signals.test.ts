import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'
import { exited, killSpawnedWorkers, spawnWorkerProcess } from '../helpers/worker-process.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  killSpawnedWorkers()
  await env.close()
})

/** Longer than bin/main.ts's grace period (15 s): a process that heard the signal is gone by then. */
const EXIT_WITHIN_MS = 25_000

function exitedWithin(child: ReturnType<typeof spawnWorkerProcess>, ms: number): Promise<number | null | 'still running'> {
  return Promise.race([exited(child), new Promise<'still running'>((r) => setTimeout(() => r('still running'), ms))])
}

describe('bin/main.ts and SIGTERM', () => {
  // A worker is seen consuming its queue a moment before its start ends: a stop asked for in that
  // moment was once dropped (the process kept running until killed), which hung the crash tests.
  it('stops with exit 0 when asked the moment its worker registers, every time', async () => {
    for (let attempt = 0; attempt < 6; attempt++) {
      const child = spawnWorkerProcess(env, mkdtempSync(path.join(os.tmpdir(), 'uds-signals-')), ['identity'])
      await until('the worker to register', () => env.ctx.queues.get('identity').getWorkersCount(), (n) => n > 0, 60_000, 5)
      child.kill('SIGTERM')
      expect(await exitedWithin(child, EXIT_WITHIN_MS), `attempt ${attempt}`).toBe(0)
      await until('the worker to leave', () => env.ctx.queues.get('identity').getWorkersCount(), (n) => n === 0, 20_000)
    }
  }, 300_000)
})
