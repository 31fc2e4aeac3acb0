import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLogger } from '../../shared/logger.js'
import { trackQueueName, type TrackJob } from '../../shared/queue/track-jobs.js'
import { QueueRegistry } from '../../shared/queue/queues.js'
import { TrackLayouts } from '../../shared/queue/track-layout.js'
import { RequestTracker } from '../../shared/queue/request-tracker.js'
import { ok, startQueueWorker, type BatchEntry, type BatchProcessor } from '../../workers/runner.js'

let redis: Redis
let queues: QueueRegistry
let worker: Worker | undefined
beforeAll(async () => {
  redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null })
  const prefix = `udstest_${randomBytes(5).toString('hex')}`
  queues = new QueueRegistry(redis, prefix, await TrackLayouts.open(redis, prefix, 1))
})
afterEach(async () => {
  await worker?.close()
  worker = undefined
})
afterAll(async () => {
  const keys = await redis.keys(`${queues.prefix}:*`)
  if (keys.length) await redis.del(...keys)
  await queues.close()
  redis.disconnect()
})

/** A track job of `n` objects, told apart by its request id. */
const job = (requestId: string, n = 1): TrackJob => ({
  workspaceId: 'ws',
  requestId,
  attributes: Array.from({ length: n }, (_, index) => ({ index, identifier: { kind: 'external_id', value: requestId }, pushTokenImport: false, fields: {}, custom: {}, pushTokens: [], subscriptionGroups: [] })),
  events: [],
  purchases: [],
  subscriptionChanges: [],
  emailStateChanges: [],
})

/**
 * An ordered track partition run by the runner with a processor that records each batch (its
 * jobs' request ids) and applies nothing; `during(k)` runs while batch k applies.
 */
async function recordBatches(maxWeight: number, during: (k: number) => Promise<void> = async () => {}) {
  const batches: string[][] = []
  const processor: BatchProcessor<'applyTrackBatch'> = {
    maxWeight,
    weight: (data) => data.attributes.length,
    joins: () => true,
    async apply(batch: BatchEntry<'applyTrackBatch'>[]) {
      batches.push(batch.map((e) => e.data.requestId))
      await during(batches.length)
      return batch.map(() => ok(1))
    },
  }
  worker = await startQueueWorker({
    queue: trackQueueName(0),
    jobName: 'applyTrackBatch',
    processor,
    connection: redis,
    queues,
    concurrency: 1,
    lockMs: 30_000,
    logger: createLogger('silent'),
    tracker: new RequestTracker(redis, queues.prefix),
  })
  return batches
}

async function waitFor(done: () => boolean) {
  for (let i = 0; i < 400 && !done(); i++) await sleep(25)
}

describe('an ordered partition applied in batches by the runner', () => {
  it('applies the queue in order, each job once, in batches up to their weight', async () => {
    const queue = queues.get(trackQueueName(0))
    await queue.obliterate({ force: true })
    const names = Array.from({ length: 40 }, (_, i) => `order-${i}`)
    for (const name of names) await queue.add('applyTrackBatch', job(name, 1 + (name.length % 3)), { jobId: name })
    const batches = await recordBatches(5)
    await waitFor(() => batches.flat().length === names.length)
    expect(batches.flat()).toEqual(names)
    for (const b of batches) expect(b.reduce((w, name) => w + 1 + (name.length % 3), 0) <= 5 || b.length === 1).toBe(true)
    expect(batches.length).toBeGreaterThan(5)
    expect(await queue.getWaitingCount()).toBe(0)
  })

  it('never applies a job removed from the queue while the batch before applied, nor skips the jobs around it', async () => {
    const queue = queues.get(trackQueueName(0))
    await queue.obliterate({ force: true })
    const names = Array.from({ length: 9 }, (_, i) => `removed-${i}`)
    for (const name of names) await queue.add('applyTrackBatch', job(name), { jobId: name })
    const batches = await recordBatches(3, async (k) => {
      if (k !== 1) return
      // While the first batch applies, an operator removes a job waiting behind it.
      await sleep(300)
      await queue.remove('removed-4')
    })
    await waitFor(() => batches.flat().length === names.length - 1)
    await sleep(100)
    expect(batches.flat()).toEqual(names.filter((n) => n !== 'removed-4'))
    expect(batches[0]).toEqual(['removed-0', 'removed-1', 'removed-2'])
    expect(batches[1]).toEqual(['removed-3', 'removed-5', 'removed-6'])
  })

  it('gathers jobs added while a batch applied into the next batch when they fit', async () => {
    const queue = queues.get(trackQueueName(0))
    await queue.obliterate({ force: true })
    for (const name of ['late-0', 'late-1']) await queue.add('applyTrackBatch', job(name), { jobId: name })
    const batches = await recordBatches(10, async (k) => {
      if (k !== 1) return
      await sleep(300)
      for (const name of ['late-2', 'late-3', 'late-4']) await queue.add('applyTrackBatch', job(name), { jobId: name })
    })
    await waitFor(() => batches.flat().length === 5)
    expect(batches).toEqual([['late-0', 'late-1'], ['late-2', 'late-3', 'late-4']])
  })
})
