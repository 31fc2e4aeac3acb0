import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectOrderedOutcome, orderedLoad, sendOrdered, waitAllDone } from '../helpers/ordered-load.js'
import { caller, expectStatus, type Call } from '../helpers/route-tour.js'
import { startWorkerPool, type WorkerPool } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'

/**
 * The track partitions changed online, as an operator does it (`PUT /admin/v1/track_partitions`,
 * the CLI's `partitions set`), while senders keep sending and two worker processes apply.
 */
let pool: WorkerPool
let call: Call
let key: string

beforeAll(async () => {
  pool = await startWorkerPool({ workers: [{}, {}] })
  call = caller(pool.apis[0])
  key = pool.credentials.api_key
}, 180_000)

afterAll(async () => {
  await pool?.stop()
})

const partitions = (body: unknown) => call('PUT', '/admin/v1/track_partitions', { token: pool.adminToken, body })

describe('a partition change under load', () => {
  it('keeps every user\'s order across 4 -> 8 -> 2, losing and doubling nothing', async () => {
    expect(expectStatus(await call('GET', '/admin/v1/track_partitions', { token: pool.adminToken }), 200).body).toEqual({ partitions: 4, generation: 0, changing: null })
    const load = orderedLoad({ tag: 'layout', users: 90, requests: 450, perRequest: 5, lanes: 6 })
    const seen: { k: number; body: any }[] = []
    const ids = await sendOrdered(call, key, load, {
      between: async (k) => {
        if (k === 120) seen.push({ k, body: expectStatus(await partitions({ partitions: 8 }), 200).body })
        if (k === 300) {
          // The second change waits for the first to drain: refused meanwhile, then taken.
          const r = await until('the change to 2 partitions to be taken', () => partitions({ partitions: 2 }), (res) => res.status === 200 || res.status !== 409, 120_000, 100)
          seen.push({ k, body: expectStatus(r, 200).body })
        }
      },
    })
    expect(seen.map((s) => s.body.partitions)).toEqual([8, 2])
    expect(seen[0].body.generation).toBe(1)
    await waitAllDone(call, key, ids)
    await expectOrderedOutcome(call, key, load)
    const settled = await until('the last change to drain', () => call('GET', '/admin/v1/track_partitions', { token: pool.adminToken }), (r) => r.body?.changing === null, 60_000, 100)
    expect(settled.body).toEqual({ partitions: 2, generation: 2, changing: null })
  }, 600_000)

  it('refuses a partition count it cannot run, naming the field', async () => {
    const r = expectStatus(await partitions({ partitions: 0 }), 400)
    expect(r.text).toMatch(/partitions/)
    expectStatus(await partitions({ partitions: 257 }), 400)
  })
})
