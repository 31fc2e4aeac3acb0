import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ClickHouse } from '../../../shared/clickhouse/client.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

/** A statement that holds its connection ~1.2 s (a block of one row per sleep). */
const slow = (ch: ClickHouse) =>
  ch.client.query({ query: 'SELECT sum(sleepEachRow(0.3)) AS s FROM numbers(4) SETTINGS max_block_size = 1', format: 'JSONEachRow' }).then((r) => r.json())

const quick = (ch: ClickHouse) => ch.client.query({ query: `SELECT count() AS n FROM ${ch.database}.events`, format: 'JSONEachRow' }).then((r) => r.json<{ n: string }>())

/** Which of two statements finished first. */
async function firstDone(a: Promise<unknown>, b: Promise<unknown>): Promise<string[]> {
  const order: string[] = []
  await Promise.all([a.then(() => order.push('a')), b.then(() => order.push('b'))])
  return order
}

describe('a connection beside the first (embedded engine)', () => {
  it('on one connection a quick statement waits for a slow one started before it', async () => {
    expect(await firstDone(slow(env.clickhouse), quick(env.clickhouse))).toEqual(['a', 'b'])
  })

  it('on the connection beside, the slow statement holds nobody back', async () => {
    const beside = env.clickhouse.beside('test-slow')
    expect(await firstDone(slow(beside), quick(env.clickhouse))).toEqual(['b', 'a'])
  })

  it('is one per name, and reads the database of the copy it was asked of', async () => {
    const a = env.clickhouse.beside('test-name')
    const b = env.clickhouse.beside('test-name')
    expect(a.client).toBe(b.client)
    expect(a.client).not.toBe(env.clickhouse.client)
    expect(env.clickhouse.beside('other').client).not.toBe(a.client)
    expect(a.database).toBe(env.clickhouse.database)
    expect(await quick(a)).toEqual(await quick(env.clickhouse))
  })
})
