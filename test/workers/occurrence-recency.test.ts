import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents, type EventRow } from '../../shared/clickhouse/event-repository.js'
import { withTransaction } from '../../shared/db/pool.js'
import { insertOverrides } from '../../shared/db/repositories/override-repository.js'
import { occurrenceRecency } from '../../workers/occurrence-recency.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

const occurrence = (ws: string, profileId: number, id: string): EventRow => ({
  workspace_id: ws, profile_id: profileId, event_id: id, kind: 'event', name: 'open', app_id: '', time: '2020-01-01T00:00:00.000Z', properties: '{}', currency: '', price: 0, quantity: 0,
})

describe('the recency an occurrence gives, read for a batch', () => {
  it('counts the occurrences of a profile merged into another as soon as the merge is in Postgres, before ClickHouse has it', async () => {
    const ws = `ws-recency-${Date.now()}`
    // Ids far above the profiles the sequence hands out, so no other test's override points at them.
    const [kept, merged, other] = [9_000_000_001, 9_000_000_002, 9_000_000_003]
    await insertEvents(env.clickhouse, [occurrence(ws, kept, 'k1'), occurrence(ws, other, 'o1')])
    await sleep(20)
    await insertEvents(env.clickhouse, [occurrence(ws, merged, 'm1')])

    await withTransaction(env.ctx.pg, async (db) => {
      const before = await occurrenceRecency(env.clickhouse, db)(ws, [kept, other])
      expect(before.get(kept)! <= before.get(other)!).toBe(true)
      await insertOverrides(db, ws, [{ from: merged, to: kept }])
      const after = await occurrenceRecency(env.clickhouse, db)(ws, [kept, other])
      // The merged profile's later occurrence is the kept one's now; the other keeps its own.
      expect(after.get(kept)! > before.get(kept)!).toBe(true)
      expect(after.get(other)).toBe(before.get(other))
      expect([...after.keys()].sort()).toEqual([kept, other].sort())
      expect((await occurrenceRecency(env.clickhouse, db)(ws, [])).size).toBe(0)
      throw new Rollback()
    }).catch((e) => {
      if (!(e instanceof Rollback)) throw e
    })
  })
})

class Rollback extends Error {}
