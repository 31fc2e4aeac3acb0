import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { isRetryable } from '../../../shared/errors.js'
import { BacklogFullError, QueueUnavailableError, submitRequest, type QueuedJob } from '../../../shared/queue/jobs.js'
import { QueueRegistry } from '../../../shared/queue/queues.js'
import { RequestTracker } from '../../../shared/queue/request-tracker.js'
import { TrackLayouts } from '../../../shared/queue/track-layout.js'

const redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
const prefix = `udstest_${randomBytes(5).toString('hex')}`
const tracker = new RequestTracker(redis, prefix)
// Nothing listens on port 1: every enqueue fails at once.
const away = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null })
away.on('error', () => {})
const layouts = await TrackLayouts.open(redis, prefix, 2)
const deadQueues = new QueueRegistry(away, prefix, layouts)

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`)
  if (keys.length) await redis.del(...keys)
  layouts.close()
  await deadQueues.close().catch(() => {})
  away.disconnect()
  await redis.quit()
})

function trackJob(requestId: string, partition: number, events: number): QueuedJob {
  const time = new Date().toISOString()
  return {
    name: 'applyTrackBatch',
    partition,
    data: {
      workspaceId: 'ws',
      requestId,
      attributes: [],
      events: Array.from({ length: events }, (_, i) => ({ index: i, identifier: { kind: 'external_id', value: `u${i}` }, name: 'e', time, properties: {} })),
      purchases: [],
      subscriptionChanges: [],
      emailStateChanges: [],
    },
  }
}

describe('submitRequest and the track backlog', () => {
  it('gives the backlog share back when the enqueue fails, and throws the retryable QueueUnavailableError', async () => {
    const err = await submitRequest({ queues: deadQueues, tracker }, { workspaceId: 'ws', requestId: 'r1', jobs: [trackJob('r1', 0, 3), trackJob('r1', 1, 2)] }).catch((e) => e)
    expect(err).toBeInstanceOf(QueueUnavailableError)
    expect(isRetryable(err)).toBe(true)
    expect(await redis.hgetall(`${prefix}:backlog`)).toEqual({})
  })

  it('refuses past the bound with a Retry-After estimate, before touching the queues', async () => {
    await tracker.create({ requestId: 'r0', workspaceId: 'ws', totalJobs: 1, shares: [{ jobKey: 'r0_0', objects: 250 }] })
    const err = await submitRequest({ queues: deadQueues, tracker }, { workspaceId: 'ws', requestId: 'r2', jobs: [trackJob('r2', 0, 60)], backlogBound: { workspace: 300 } }).catch((e) => e)
    expect(err).toBeInstanceOf(BacklogFullError)
    expect(err).toMatchObject({ retryAfterSeconds: 1, refusal: { scope: 'workspace', objects: 250, limit: 300 } })
    expect(await redis.hgetall(`${prefix}:backlog`)).toEqual({ all: '250', 'ws:ws': '250' })
  })
})
