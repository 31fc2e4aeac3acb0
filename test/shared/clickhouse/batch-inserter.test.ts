import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BatchInserter, batchInserterOf } from '../../../shared/clickhouse/batch-inserter.js'
import type { ClickHouse } from '../../../shared/clickhouse/client.js'
import { TsvRows } from '../../../shared/clickhouse/tsv.js'
import { countEvents, insertEvents, readEventSummaries, type EventRow } from '../../../shared/clickhouse/event-repository.js'
import { readSnapshots, writeSnapshots } from '../../../shared/clickhouse/snapshot-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

describe('inserts through the group commit', () => {
  const awkward = 'tab\there, line\nbreak, cr\r, back\\slash, quote " and ünï €'

  it('stores every string exactly, whatever characters it holds', async () => {
    const properties = JSON.stringify({ text: awkward, nested: { list: ['\\', '\t'] } })
    const row: EventRow = {
      workspace_id: 'ws-tsv', profile_id: 42, event_id: `id ${awkward}`, kind: 'event', name: awkward, app_id: 'app\t1',
      time: '2024-05-01T12:00:00.123Z', properties, currency: '', price: 2.25, quantity: 3,
    }
    await insertEvents(env.clickhouse, [row])
    const rs = await env.clickhouse.client.query({
      query: `SELECT event_id, name, app_id, properties, price, quantity, toString(time) AS time FROM ${env.clickhouse.database}.events WHERE workspace_id = 'ws-tsv'`,
      format: 'JSONEachRow',
    })
    expect(await rs.json()).toEqual([
      { event_id: row.event_id, name: awkward, app_id: 'app\t1', properties, price: 2.25, quantity: 3, time: '2024-05-01 12:00:00.123' },
    ])
    // And reads back exactly through a TabSeparated result.
    expect((await readEventSummaries(env.clickhouse, 'ws-tsv', [42])).get(42)).toEqual([
      { kind: 'event', name: awkward, first: '2024-05-01T12:00:00.123Z', last: '2024-05-01T12:00:00.123Z', count: 1 },
    ])
  })

  it('stores a snapshot record that reads back as the same object', async () => {
    const record = { created_at: '2024-05-01T12:00:00.000Z', service_id: 's-1', random_bucket: 9, first_name: awkward, custom_attributes: { note: 'a\\b' } }
    await writeSnapshots(env.clickhouse, [{ workspace_id: 'ws-tsv', profile_id: 42, version: 1, random_bucket: 9, record }])
    expect((await readSnapshots(env.clickhouse, 'ws-tsv', [42])).get(42)).toEqual(record)
  })

  it('leaves rows of one insert that share a key for the reads to tell apart: the newest snapshot, each event once', async () => {
    const record = (v: number) => ({ created_at: '2024-05-01T12:00:00.000Z', service_id: 's-2', random_bucket: 3, first_name: `v${v}` })
    // One insert holding two versions of a profile, the newer first, and an event twice (a delivery repeated inside one insert).
    await writeSnapshots(env.clickhouse, [2, 1].map((version) => ({ workspace_id: 'ws-dup', profile_id: 7, version, random_bucket: 3, record: record(version) })))
    const event: EventRow = {
      workspace_id: 'ws-dup', profile_id: 7, event_id: 'req-dup:e:0', kind: 'event', name: 'twice', app_id: '',
      time: '2024-05-01T12:00:00.000Z', properties: '{}', currency: '', price: 0, quantity: 0,
    }
    await insertEvents(env.clickhouse, [event, event])
    // Stored as sent (the insert does not collapse them: REPLACING_INSERT) ...
    const stored = await env.clickhouse.client.query({
      query: `SELECT (SELECT count() FROM ${env.clickhouse.database}.events WHERE workspace_id = 'ws-dup') AS events,
                     (SELECT count() FROM ${env.clickhouse.database}.profile_snapshots WHERE workspace_id = 'ws-dup') AS snapshots`,
      format: 'JSONEachRow',
    })
    expect(await stored.json()).toEqual([{ events: 2, snapshots: 2 }])
    // ... and read as one.
    expect((await readSnapshots(env.clickhouse, 'ws-dup', [7])).get(7)).toEqual(record(2))
    expect(await countEvents(env.clickhouse, 'ws-dup', [7])).toEqual([{ kind: 'event', n: 1 }])
    expect((await readEventSummaries(env.clickhouse, 'ws-dup', [7])).get(7)).toEqual([
      { kind: 'event', name: 'twice', first: '2024-05-01T12:00:00.000Z', last: '2024-05-01T12:00:00.000Z', count: 1 },
    ])
  })

  it('writes the rows of inserts made at the same moment, each caller settling once its rows are stored', async () => {
    const rowsOf = (n: number): EventRow[] =>
      Array.from({ length: 50 }, (_, i) => ({
        workspace_id: 'ws-together', profile_id: n, event_id: `e-${n}-${i}`, kind: 'event', name: `caller ${n}`, app_id: '',
        time: '2024-05-01T12:00:00.000Z', properties: '{"ü":"€"}', currency: '', price: 0, quantity: 0,
      }))
    // The first insert goes at once; the others gather behind it into one insert.
    await Promise.all([1, 2, 3, 4].map((n) => insertEvents(env.clickhouse, rowsOf(n))))
    const rs = await env.clickhouse.client.query({
      query: `SELECT toString(profile_id) AS id, toString(count()) AS n, any(properties) AS p FROM ${env.clickhouse.database}.events WHERE workspace_id = 'ws-together' GROUP BY id ORDER BY id`,
      format: 'JSONEachRow',
    })
    expect(await rs.json()).toEqual([1, 2, 3, 4].map((n) => ({ id: String(n), n: '50', p: '{"ü":"€"}' })))
  })

  it('rejects the callers of an insert the engine refuses, and inserts the next batch', async () => {
    const inserter = batchInserterOf(env.clickhouse)
    const table = `${env.clickhouse.database}.no_such_table`
    const rows = new TsvRows()
    rows.add(['x'])
    const refused = inserter.insert({ table, columns: ['a'] }, rows)
    await expect(refused).rejects.toThrow(/no_such_table/i)
    const row: EventRow = {
      workspace_id: 'ws-after-refusal', profile_id: 1, event_id: 'e-1', kind: 'event', name: 'after', app_id: '', time: '2024-05-01T12:00:00.000Z',
      properties: '{}', currency: '', price: 0, quantity: 0,
    }
    await insertEvents(env.clickhouse, [row])
    const rs = await env.clickhouse.client.query({
      query: `SELECT name FROM ${env.clickhouse.database}.events WHERE workspace_id = 'ws-after-refusal'`,
      format: 'JSONEachRow',
    })
    expect(await rs.json()).toEqual([{ name: 'after' }])
  })

  it('inserts into a table at most once an interval, rows arriving meanwhile joining the next insert; idle, at once', async () => {
    // The real engine, each insert's start and table recorded on the way.
    const starts: { at: number; table: string }[] = []
    const ch: ClickHouse = {
      ...env.clickhouse,
      insertTabSeparated: (insert) => {
        starts.push({ at: performance.now(), table: insert.table })
        return env.clickhouse.insertTabSeparated(insert)
      },
    }
    const inserter = new BatchInserter(ch, 400)
    const table = `${env.clickhouse.database}.events`
    const columns = ['workspace_id', 'profile_id', 'event_id', 'kind', 'name', 'app_id', 'time', 'properties', 'currency', 'price', 'quantity']
    const insert = (id: string) => {
      const rows = new TsvRows()
      rows.add(['ws-interval', 1, id, 'event', id, '', '2024-05-01T12:00:00.000Z', '{}', '', 0, 0])
      return inserter.insert({ table, columns }, rows)
    }
    const asked = performance.now()
    await insert('first')
    const second = insert('second')
    await new Promise((r) => setTimeout(r, 100))
    const third = insert('third')
    await Promise.all([second, third])
    const eventsInserts = starts.filter((s) => s.table === table)
    // The first at once; the second and third together, an interval after the first began.
    expect(eventsInserts).toHaveLength(2)
    expect(eventsInserts[0].at - asked).toBeLessThan(300)
    expect(eventsInserts[1].at - eventsInserts[0].at).toBeGreaterThanOrEqual(399)
    // Rows after an interval of nothing go at once.
    await new Promise((r) => setTimeout(r, 450))
    const late = performance.now()
    await insert('fourth')
    expect(starts).toHaveLength(3)
    expect(starts[2].at - late).toBeLessThan(300)
    const rs = await env.clickhouse.client.query({
      query: `SELECT name FROM ${table} WHERE workspace_id = 'ws-interval' ORDER BY name`,
      format: 'JSONEachRow',
    })
    expect(await rs.json()).toEqual([{ name: 'first' }, { name: 'fourth' }, { name: 'second' }, { name: 'third' }])
  })
})
