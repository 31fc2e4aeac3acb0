import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents, readEventSummaries } from '../../../shared/clickhouse/event-repository.js'
import { countSegmentMembers } from '../../../shared/clickhouse/segment-repository.js'
import { writeSnapshots } from '../../../shared/clickhouse/snapshot-repository.js'
import type { Filter } from '../../../shared/domain/segment-filter.js'
import { clickhouseReadKeys, RemoteClickHouseReads } from '../../../shared/queue/clickhouse-reads.js'
import { serveEngineInThread } from '../../../workers/engine/in-thread.js'
import { ReadPriority } from '../../../workers/engine/priority.js'
import type { Served } from '../../../workers/engine/pop-loop.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

describe('ClickHouse reads served from a thread of the engine holder', () => {
  let env: TestEnv
  let server: Served
  let remote: RemoteClickHouseReads
  /** Records what the thread tells the main thread. */
  class RecordingPriority extends ReadPriority {
    told: string[] = []
    begin() {
      this.told.push('begin')
      super.begin()
    }
    end() {
      this.told.push('end')
      super.end()
    }
  }
  const priority = new RecordingPriority()
  const ws = 'ws-read-thread'
  const filter: Filter = { field: 'country', op: 'eq', value: 'FR' }
  const snapshot = (id: number, country: string) => ({
    workspace_id: ws,
    profile_id: id,
    version: 1,
    random_bucket: id,
    record: { created_at: '2026-01-01T00:00:00.000Z', service_id: `svc-${id}`, external_id: `t-${id}`, random_bucket: id, country },
  })

  beforeAll(async () => {
    env = await startTestEnv()
    await writeSnapshots(env.clickhouse, [snapshot(1, 'FR'), snapshot(2, 'DE'), snapshot(3, 'FR')])
    const holder = JSON.stringify({ pid: process.pid, host: 'test', seat: 'seat-1' })
    server = await serveEngineInThread({
      data: { redisUrl: env.config.REDIS_URL, prefix: env.config.QUEUE_PREFIX, dataDir: env.clickhouse.dataDir!, database: env.clickhouse.database, logLevel: 'silent', holder, seat: 'seat-1' },
      priority,
      logger: env.ctx.logger,
    })
    const subscriber = new Redis(env.config.REDIS_URL, { maxRetriesPerRequest: null })
    remote = await RemoteClickHouseReads.connect({ redis: env.ctx.redis, subscriber, prefix: env.config.QUEUE_PREFIX, timeoutMs: 2_000 })
  })
  afterAll(async () => {
    await remote.close()
    await server.stop()
    await env.close()
  })

  it('answers a segment size from its own connection to the engine this process holds', async () => {
    expect(await countSegmentMembers(env.clickhouse, ws, filter)).toBe(2)
    expect(await remote.segmentSize(ws, filter)).toBe(2)
    // Rows the main thread writes are what the thread counts next.
    await writeSnapshots(env.clickhouse, [snapshot(4, 'FR')])
    expect(await remote.segmentSize(ws, filter)).toBe(3)
    expect(await remote.check()).toMatch(/^ok \(embedded engine held by worker process \d+/)
  })

  it('answers event summaries as the engine holder reads them, keyed by profile id', async () => {
    const at = '2026-03-01T10:00:00.000Z'
    const row = (id: number, eventId: string, kind: 'event' | 'purchase', name: string) => ({
      workspace_id: ws, profile_id: id, event_id: eventId, kind, name, app_id: '', time: at, properties: '{}', currency: '', price: 0, quantity: 0,
    })
    await insertEvents(env.clickhouse, [row(1, 'e-1', 'event', 'open'), row(1, 'e-2', 'event', 'open'), row(3, 'p-1', 'purchase', 'sku')])
    const summaries = await remote.eventSummaries(ws, [1, 2, 3])
    expect(summaries).toEqual(await readEventSummaries(env.clickhouse, ws, [1, 2, 3]))
    expect(summaries).toEqual(
      new Map([
        [1, [{ kind: 'event', name: 'open', first: at, last: at, count: 2 }]],
        [3, [{ kind: 'purchase', name: 'sku', first: at, last: at, count: 1 }]],
      ]),
    )
  })

  it('tells the main thread when each read begins and ends, so batches hold back meanwhile', async () => {
    // The thread's word about earlier reads may still be on its way: wait until every begin has its end.
    const settled = async () => {
      for (let i = 0; i < 100 && priority.told.filter((t) => t === 'begin').length * 2 !== priority.told.length; i++) {
        await new Promise((r) => setTimeout(r, 10))
      }
    }
    await settled()
    priority.told = []
    expect(await remote.segmentSize(ws, filter)).toBe(3)
    await settled()
    expect(priority.told).toEqual(['begin', 'end'])
    const t = Date.now()
    await priority.yield()
    expect(Date.now() - t).toBeLessThan(100)
  })

  it('leaves no heartbeat once stopped, so API processes answer 503 at once', async () => {
    const keys = clickhouseReadKeys(env.config.QUEUE_PREFIX)
    expect(await env.ctx.redis.get(keys.holder)).toContain(String(process.pid))
    await server.stop()
    expect(await env.ctx.redis.get(keys.holder)).toBeNull()
    await expect(remote.segmentSize(ws, filter)).rejects.toThrow(/no worker process holds the embedded engine/)
  })
})
