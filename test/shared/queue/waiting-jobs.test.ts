import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { QueueRegistry } from '../../../shared/queue/queues.js'
import { TrackLayouts } from '../../../shared/queue/track-layout.js'
import { oldestWaiting, removeWaiting } from '../../../shared/queue/waiting-jobs.js'

let redis: Redis
let queues: QueueRegistry
beforeAll(async () => {
  redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null })
  const prefix = `udstest_${randomBytes(5).toString('hex')}`
  queues = new QueueRegistry(redis, prefix, await TrackLayouts.open(redis, prefix, 1))
})
afterAll(async () => {
  const keys = await redis.keys(`${queues.prefix}:*`)
  if (keys.length) await redis.del(...keys)
  await queues.close()
  redis.disconnect()
})

async function fill(name: string, count: number): Promise<string[]> {
  const queue = queues.get(name)
  const ids: string[] = []
  for (let i = 0; i < count; i++) ids.push((await queue.add('probe', { n: i }, { jobId: `${name}-${i}` })).id!)
  return ids
}

describe('waiting jobs read and removed a batch at a time', () => {
  it('reads the oldest first, in pages, with their payloads and enqueue times', async () => {
    const before = Date.now()
    const ids = await fill('peek', 5)
    const queue = queues.get('peek')
    const stamps = await Promise.all(ids.map(async (id) => (await queue.getJob(id))!.timestamp))
    expect(stamps.every((t) => t >= before && t <= Date.now())).toBe(true)
    const read = async (start: number, count: number) =>
      (await oldestWaiting(redis, queue, start, count)).jobs.map((j) => ({ id: j.id, data: JSON.parse(j.payload), timestamp: j.timestamp }))
    expect(await read(0, 3)).toEqual([0, 1, 2].map((n) => ({ id: ids[n], data: { n }, timestamp: stamps[n] })))
    expect(await read(3, 3)).toEqual([3, 4].map((n) => ({ id: ids[n], data: { n }, timestamp: stamps[n] })))
    expect(await oldestWaiting(redis, queue, 5, 3)).toEqual({ jobs: [], cut: false })
  })

  it('stops a read of large payloads at its byte budget and says so, always returning at least one', async () => {
    const queue = queues.get('large')
    const big = 'x'.repeat(100 * 1024)
    for (let i = 0; i < 3; i++) await queue.add('probe', { n: i, big }, { jobId: `large-${i}` })
    const first = await oldestWaiting(redis, queue, 0, 3)
    expect(first.cut).toBe(true)
    expect(first.jobs.map((j) => JSON.parse(j.payload).n)).toEqual([0, 1])
    const rest = await oldestWaiting(redis, queue, 2, 3)
    expect(rest).toMatchObject({ cut: false })
    expect(rest.jobs.map((j) => JSON.parse(j.payload).n)).toEqual([2])
  })

  it('removes the oldest jobs with their hashes and leaves the rest in order', async () => {
    const ids = await fill('trim', 5)
    const queue = queues.get('trim')
    await removeWaiting(redis, queue, ids.slice(0, 3))
    expect((await queue.getWaiting(0, -1)).map((j) => j.id)).toEqual(ids.slice(3))
    for (const id of ids.slice(0, 3)) expect(await queue.getJob(id)).toBeUndefined()
    // Repeating a removal (a retry after a lost reply) changes nothing.
    await removeWaiting(redis, queue, ids.slice(0, 3))
    expect(await queue.getWaitingCount()).toBe(2)
  })

  it('removes by id when the jobs are not the oldest in the list', async () => {
    const ids = await fill('scattered', 5)
    const queue = queues.get('scattered')
    await removeWaiting(redis, queue, [ids[1], ids[3]])
    expect((await queue.getWaiting(0, -1)).map((j) => j.id)).toEqual([ids[0], ids[2], ids[4]])
    expect(await queue.getJob(ids[3])).toBeUndefined()
  })
})
