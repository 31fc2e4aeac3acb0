import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents, lastOccurrences, readEventSummaries, type EventRow } from '../../../shared/clickhouse/event-repository.js'
import { copyOverriddenEvents, writeOverrides } from '../../../shared/clickhouse/history-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

const occurrence = (ws: string, profileId: number, id: string, name: string, time: string): EventRow => ({
  workspace_id: ws, profile_id: profileId, event_id: id, kind: 'event', name, app_id: '', time, properties: '{}', currency: '', price: 0, quantity: 0,
})

describe('what the event history says of a profile', () => {
  it('answers when each profile last had an occurrence written, a merged profile’s counting for the one it merged into', async () => {
    const ws = `ws-last-${Date.now()}`
    const before = new Date().toISOString()
    await insertEvents(env.clickhouse, [occurrence(ws, 1, 'e1', 'open', '2020-01-01T00:00:00.000Z'), occurrence(ws, 2, 'e2', 'open', '2020-01-01T00:00:00.000Z')])
    await sleep(20)
    const between = new Date().toISOString()
    await sleep(20)
    // Profile 3, merged into 1, gets an occurrence later than anyone's (its event time, years ago, does not matter).
    await insertEvents(env.clickhouse, [occurrence(ws, 3, 'e3', 'open', '2019-01-01T00:00:00.000Z')])
    const merge = { workspaceId: ws, oldProfileId: 3, newProfileId: 1, version: 1, deleted: false }
    await writeOverrides(env.clickhouse, [merge])

    expect((await lastOccurrences(env.clickhouse, ws, [1], [])).get(1)! < between).toBe(true)
    const last = await lastOccurrences(env.clickhouse, ws, [1, 2, 4], [merge])
    expect([...last.keys()].sort()).toEqual([1, 2])
    expect(last.get(2)! >= before && last.get(2)! < between).toBe(true)
    expect(last.get(1)! > between).toBe(true)
    expect(last.get(1)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

    // The sweep's copy keeps the time it was first written: a sweep makes nobody more recent.
    await copyOverriddenEvents(env.clickhouse, [merge])
    expect((await lastOccurrences(env.clickhouse, ws, [1], [])).get(1)).toBe(last.get(1))
    expect((await readEventSummaries(env.clickhouse, ws, [1])).get(1)).toEqual([{ kind: 'event', name: 'open', first: '2019-01-01T00:00:00.000Z', last: '2020-01-01T00:00:00.000Z', count: 2 }])
    expect((await lastOccurrences(env.clickhouse, ws, [], [merge])).size).toBe(0)
  })
})
