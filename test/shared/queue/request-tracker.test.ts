import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { RequestTracker } from '../../../shared/queue/request-tracker.js'

const redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
const base = `udstest_${randomBytes(5).toString('hex')}`
let prefix = base
let tracker = new RequestTracker(redis, prefix)

beforeEach((t) => {
  prefix = `${base}_${t.task.id}`
  tracker = new RequestTracker(redis, prefix)
})

afterAll(async () => {
  const keys = await redis.keys(`${base}_*`)
  if (keys.length) await redis.del(...keys)
  await redis.quit()
})

/**
 * Writes to the Redis socket while fn runs: a pipeline or one script call is one write, one round
 * trip. fn must be safe to repeat: another test file restarts Redis, which forgets loaded scripts,
 * and the first call after that is answered NOSCRIPT and sent again; the count of a second call
 * is then the one that tells.
 */
async function roundTrips(fn: () => Promise<unknown>): Promise<number> {
  const first = await writesWhile(fn)
  return first === 1 ? first : Math.min(first, await writesWhile(fn))
}

async function writesWhile(fn: () => Promise<unknown>): Promise<number> {
  const stream = (redis as unknown as { stream: { write: (...a: unknown[]) => boolean } }).stream
  const write = stream.write
  let writes = 0
  stream.write = (...a: unknown[]) => {
    writes++
    return write.apply(stream, a)
  }
  try {
    await fn()
  } finally {
    stream.write = write
  }
  return writes
}

describe('request tracker batch API', () => {
  it('reports a batch in one script call, idempotently per job', async () => {
    await tracker.create({ requestId: 'r1', workspaceId: 'ws1', totalJobs: 2, errors: [{ type: 'invalid_object', index: 0 }], shares: [{ jobKey: 'r1_0', objects: 3 }, { jobKey: 'r1_1', objects: 2 }] })
    await tracker.create({ requestId: 'r2', workspaceId: 'ws2', totalJobs: 1, shares: [{ jobKey: 'r2_0', objects: 4 }] })
    expect((await tracker.backlog()).all).toBe(9)

    expect(await roundTrips(() => tracker.markStartedMany(['r1', 'r2']))).toBe(1)
    expect(await tracker.get('r1', 'ws1')).toEqual({ request_id: 'r1', status: 'processing', errors: [{ type: 'invalid_object', index: 0 }] })

    const batch = [
      { requestId: 'r1', jobKey: 'r1_0', status: 'done' as const, errors: [{ message: 'skipped one' }] },
      { requestId: 'r2', jobKey: 'r2_0', status: 'failed' as const, errors: [{ message: 'bad' }] },
    ]
    // A Redis that never ran the report script answers NOSCRIPT once (then EVAL): load it first.
    await tracker.reportJobs([{ requestId: 'warm-up', jobKey: 'warm-up_0', status: 'done' }])
    let finished: unknown
    // The first call's answer: a second one, if roundTrips repeats it, is a replay.
    expect(await roundTrips(async () => void (finished ??= await tracker.reportJobs(batch)))).toBe(1)
    // r2 had one job: this report finished it (failed); r1 waits for its second job.
    expect(finished).toEqual([{ report: 1, status: 'failed' }])
    let b = await tracker.backlog()
    expect(b.all).toBe(2)
    expect(Object.fromEntries(b.byWorkspace)).toEqual({ ws1: 2 })

    // A replay after a crash: nothing changes, and no request is finished a second time.
    expect(await tracker.reportJobs(batch)).toEqual([])
    await tracker.markJobDone('r1', 'r1_0', [{ message: 'skipped one' }])
    await tracker.markJobFailed('r2', 'r2_0', [{ message: 'bad' }])
    expect((await tracker.backlog()).all).toBe(2)
    expect(await tracker.get('r2', 'ws2')).toEqual({ request_id: 'r2', status: 'failed', errors: [{ message: 'bad' }] })
    expect(await tracker.get('r1', 'ws1')).toEqual({
      request_id: 'r1',
      status: 'processing',
      errors: [{ type: 'invalid_object', index: 0 }, { message: 'skipped one' }],
    })

    expect(await tracker.reportJobs([{ requestId: 'r1', jobKey: 'r1_1', status: 'done' }])).toEqual([{ report: 0, status: 'done' }])
    expect(await tracker.reportJobs([{ requestId: 'r1', jobKey: 'r1_1', status: 'done' }])).toEqual([])
    expect(await tracker.get('r1', 'ws1')).toMatchObject({ status: 'done' })
    b = await tracker.backlog()
    expect(b.all).toBe(0)
    expect(b.byWorkspace.size).toBe(0)
    expect(await redis.hgetall(`${prefix}:backlog`)).toEqual({})
    expect(await tracker.get('r1', 'ws2')).toBeUndefined()
  })

  it('refuses a request that would overfill the workspace or the whole backlog, recording nothing', async () => {
    const bound = { all: 10, workspace: 6 }
    expect(await tracker.create({ requestId: 'a1', workspaceId: 'wsA', totalJobs: 1, shares: [{ jobKey: 'a1_0', objects: 5 }], bound })).toBeUndefined()
    expect(await tracker.create({ requestId: 'a2', workspaceId: 'wsA', totalJobs: 1, shares: [{ jobKey: 'a2_0', objects: 2 }], bound })).toEqual({ scope: 'workspace', objects: 5, limit: 6 })
    expect(await tracker.create({ requestId: 'b1', workspaceId: 'wsB', totalJobs: 1, shares: [{ jobKey: 'b1_0', objects: 5 }], bound })).toBeUndefined()
    expect(await tracker.create({ requestId: 'c1', workspaceId: 'wsC', totalJobs: 1, shares: [{ jobKey: 'c1_0', objects: 1 }], bound })).toEqual({ scope: 'all', objects: 10, limit: 10 })
    expect(await redis.exists(`${prefix}:request:a2`, `${prefix}:request:c1`)).toBe(0)
    // Counted but never refused (no bound given).
    expect(await tracker.create({ requestId: 'c2', workspaceId: 'wsC', totalJobs: 1, shares: [{ jobKey: 'c2_0', objects: 1 }] })).toBeUndefined()
    expect((await tracker.backlog()).all).toBe(11)

    // An enqueue that failed gives the share back once; a job already reported keeps nothing to give.
    await tracker.markJobDone('a1', 'a1_0')
    await tracker.release('a1')
    await tracker.release('b1')
    await tracker.release('b1')
    await tracker.markJobDone('b1', 'b1_0')
    await tracker.markJobDone('c2', 'c2_0')
    expect(await redis.hgetall(`${prefix}:backlog`)).toEqual({})
  })
})
