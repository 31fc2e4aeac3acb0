// The ClickHouse server path (CLICKHOUSE_URL) end to end through the real @clickhouse/client HTTP
// transport, against test/helpers/clickhouse-http-shim.ts: a chDB engine behind the protocol subset
// the client uses, answering version() with a stated release. It is not a ClickHouse server.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { ClickHouseLogLevel, createClient } from '@clickhouse/client'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { openClickHouse, type ClickHouse } from '../../../shared/clickhouse/client.js'
import { countEvents, insertEvents, lastOccurrences, readEventSummaries, type EventRow } from '../../../shared/clickhouse/event-repository.js'
import { copyOverriddenEvents, eraseRowsOf, writeOverrides } from '../../../shared/clickhouse/history-repository.js'
import { migrateClickHouse, MIGRATIONS_TABLE } from '../../../shared/clickhouse/migrate.js'
import { compileFor, countSegmentMembers, readSegmentPage } from '../../../shared/clickhouse/segment-repository.js'
import { readSnapshots, writeSnapshots, writeTombstones } from '../../../shared/clickhouse/snapshot-repository.js'
import type { Filter } from '../../../shared/domain/segment-filter.js'
import type { StoredRecord } from '../../../shared/domain/user-record.js'
import { startClickHouseShim, type ClickHouseShim } from '../../helpers/clickhouse-shim.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { asSent, recordingClickHouse, withoutRepeats } from '../../helpers/statement-recorder.js'

let env: TestEnv
const shims: ClickHouseShim[] = []
const opened: ClickHouse[] = []
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterEach(async () => {
  for (const ch of opened.splice(0)) await ch.close()
  for (const shim of shims.splice(0)) await shim.close()
})
afterAll(async () => {
  await env?.close()
})

async function shimOf(version: string, dataDir?: string): Promise<ClickHouseShim> {
  const shim = await startClickHouseShim(version, { dataDir })
  shims.push(shim)
  return shim
}

function serverAt(shim: ClickHouseShim, database: string, opts: { maxOpenConnections?: number } = {}): ClickHouse {
  const ch = openClickHouse({ url: shim.url, dataDir: '/nonexistent', database, ...opts })
  opened.push(ch)
  return ch
}

const newDatabase = () => `uds_shim_${randomBytes(5).toString('hex')}`

async function tableSettings(ch: ClickHouse, table: string): Promise<string> {
  const rs = await ch.client.query({
    query: 'SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {table:String}',
    query_params: { db: ch.database, table },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ create_table_query: string }>()
  return row.create_table_query.slice(row.create_table_query.indexOf('SETTINGS'))
}

async function recordedOutcomes(ch: ClickHouse): Promise<Record<string, { outcome: string; server_version: string }>> {
  const rs = await ch.client.query({
    query: `SELECT file, argMax(outcome, recorded_at) AS outcome, argMax(server_version, recorded_at) AS server_version FROM ${ch.database}.${MIGRATIONS_TABLE} GROUP BY file`,
    format: 'JSONEachRow',
  })
  return Object.fromEntries((await rs.json<{ file: string; outcome: string; server_version: string }>()).map((r) => [r.file, r]))
}

const WS = 'ws-shim'
const event = (profileId: number, name: string, i: number): EventRow => ({
  workspace_id: WS, profile_id: profileId, event_id: `e-${profileId}-${name}-${i}`, kind: 'event', name, app_id: '',
  time: `2024-05-0${1 + i}T12:00:00.000Z`, properties: '{"k":"tab\\there"}', currency: '', price: 0, quantity: 0,
})
const record = (email: string): StoredRecord => ({ created_at: '2024-01-01T00:00:00.000Z', service_id: email, random_bucket: 7, email }) as StoredRecord
const OPENED: Filter = { custom_event: 'open', op: 'count_gte', value: 2 }
const NOT_OPENED: Filter = { custom_event: 'open', op: 'count_lt', value: 1 }
/** Profile ids no row has, of 11 digits: a sweep binds this many, past what a 1 MiB URL holds. */
const MANY_IDS = Array.from({ length: 90_000 }, (_, i) => 10_000_000_000 + i)

/**
 * Every repository statement the service sends, with fixed inputs, awaited one after another; the
 * answers (the same on any transport). Profile 3 is merged into 1, profile 2 deleted.
 */
async function scenario(ch: ClickHouse): Promise<unknown[]> {
  await migrateClickHouse(ch)
  await insertEvents(ch, [event(1, 'open', 0), event(1, 'open', 1), event(2, 'open', 0), event(3, 'open', 2), event(3, 'buy', 0)])
  await writeSnapshots(ch, [1, 2, 3].map((id) => ({ workspace_id: WS, profile_id: id, version: 1, random_bucket: 7, record: record(`u${id}@example.com`) })))
  const merge = { workspaceId: WS, oldProfileId: 3, newProfileId: 1, version: 1, deleted: false }
  await writeOverrides(ch, [merge])
  await writeTombstones(ch, WS, [{ id: 3, version: 2 }])
  const answers: unknown[] = [
    [...(await readEventSummaries(ch, WS, [1, 2]))],
    await countEvents(ch, WS),
    await countEvents(ch, WS, [1]),
    await countSegmentMembers(ch, WS, OPENED, { plan: 'all' }),
    await countSegmentMembers(ch, WS, OPENED, { plan: 'candidates' }),
    await countSegmentMembers(ch, WS, NOT_OPENED, { plan: 'all' }),
    await readSegmentPage(ch, WS, compileFor(ch, OPENED), { after: '0', limit: 10 }),
    [...(await readSnapshots(ch, WS, [1, 2, 3]))],
    [...(await lastOccurrences(ch, WS, [1], [{ oldProfileId: 3, newProfileId: 1 }]))].map(([id]) => id),
  ]
  await copyOverriddenEvents(ch, [merge])
  // One after another here (the sweep runs the first two at once): the statements' order is then the same on both transports.
  const gone = [{ workspaceId: WS, profileIds: [3, 2, ...MANY_IDS] }]
  for (const table of ['events', 'profile_snapshots', 'profile_overrides'] as const) await eraseRowsOf(ch, table, gone)
  answers.push([...(await readEventSummaries(ch, WS, [1, 2]))], await countEvents(ch, WS))
  return answers
}

describe('the server path (through the HTTP shim over chDB, not a real server)', () => {
  it('sends exactly the statements the embedded engine runs, with the same settings, parameters and rows, and reads the same answers', async () => {
    const database = newDatabase()
    const version = ((await (await env.clickhouse.client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })).json()) as { v: string }[])[0].v
    const embedded = recordingClickHouse({ ...env.clickhouse, database })
    const shim = await shimOf(version)
    const server = serverAt(shim, database)
    try {
      const onEmbedded = await scenario(embedded.ch)
      const onServer = await scenario(server)
      expect(onServer).toEqual(onEmbedded)
      // The merge and the erasure are visible: profile 1 owns 3's events, 2 is gone.
      expect(onServer.at(-1)).toEqual([{ kind: 'event', n: 4 }])
      const sent = (await shim.statements()).map(asSent)
      expect(withoutRepeats(sent)).toEqual(withoutRepeats(embedded.sent))
    } finally {
      await env.clickhouse.client.command({ query: `DROP DATABASE IF EXISTS ${database}` })
    }
  }, 120_000)

  it('carries every query parameter in the request body: an erasure binding 90,000 ids gets through, and the same statement with its ids in the URL is refused', async () => {
    const shim = await shimOf('24.8.14.39')
    const server = serverAt(shim, newDatabase())
    await migrateClickHouse(server)
    await shim.reset()
    await eraseRowsOf(server, 'events', [{ workspaceId: WS, profileIds: MANY_IDS }])
    const sent = await shim.statements()
    const erase = sent.find((s) => s.sql.startsWith(`ALTER TABLE ${server.database}.events DELETE`))!
    expect(erase.multipart).toBe(true)
    expect(erase.params.ids.split(',').length).toBe(90_000)
    expect(new URLSearchParams({ param_ids: erase.params.ids }).toString().length).toBeGreaterThan(1024 * 1024)
    expect(erase.uriLength).toBeLessThan(200)
    // No statement of the whole start and erasure carried a parameter in its URL.
    expect(sent.flatMap((s) => s.urlParams)).toEqual([])
    // What a client sending parameters in the URL meets: the server's 1 MiB http_max_uri_size.
    const inUrl = createClient({ url: shim.url, use_multipart_params: false, log: { level: ClickHouseLogLevel.OFF } })
    try {
      await expect(inUrl.query({ query: 'SELECT length({ids:Array(UInt64)}) AS n', query_params: { ids: MANY_IDS }, format: 'JSONEachRow' })).rejects.toThrow()
    } finally {
      await inUrl.close()
    }
    expect((await shim.statements()).at(-1)!.refused).toMatch(/http_max_uri_size/)
  }, 60_000)

  it('pins the settings of every insert: no async insert, whatever the server defaults to', async () => {
    const shim = await shimOf('26.3.1.1')
    const server = serverAt(shim, newDatabase())
    await migrateClickHouse(server)
    await insertEvents(server, [event(9, 'open', 0)])
    await writeSnapshots(server, [{ workspace_id: WS, profile_id: 9, version: 1, random_bucket: 1, record: record('n@example.com') }])
    const inserts = (await shim.statements()).filter((s) => s.sql.startsWith('INSERT'))
    expect(inserts.length).toBeGreaterThanOrEqual(3)
    for (const s of inserts) expect(s.settings.async_insert).toBe('0')
  }, 60_000)
})

describe('migrations on each supported release (the shim answering version() with it)', () => {
  it('skip the merge_selector_base migrations on 24.3 and 24.8, record why, and apply them once the server is 24.11', async () => {
    for (const version of ['24.3.18.7', '24.8.14.39']) {
      const server = serverAt(await shimOf(version), newDatabase())
      // The shim refuses merge_selector_base before 24.11, as those servers do: a start that sent it fails here.
      const outcomes = await migrateClickHouse(server)
      expect(outcomes.filter((o) => o.skipped).map((o) => o.file)).toEqual(['005_event_merge_base.sql', '006_snapshot_merge_base.sql'])
      expect(await tableSettings(server, 'events')).not.toContain('merge_selector_base')
      expect(await tableSettings(server, 'events')).toContain('simultaneous_parts_removal_limit = 200')
      const recorded = await recordedOutcomes(server)
      expect(recorded['005_event_merge_base.sql']).toEqual({ file: '005_event_merge_base.sql', outcome: `skipped: needs ClickHouse 24.11, the server is ${version}`, server_version: version })
      expect(recorded['004_steady_part_cleanup.sql'].outcome).toBe('applied')
    }
    // An upgrade: the same data under a 24.11 server; the next start applies what was skipped, and only that.
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-ch-upgrade-'))
    try {
      const database = newDatabase()
      const old = await shimOf('24.8.14.39', dataDir)
      await migrateClickHouse(serverAt(old, database))
      await old.close()
      const upgraded = await shimOf('24.11.1.2557', dataDir)
      const server = serverAt(upgraded, database)
      const outcomes = await migrateClickHouse(server)
      expect(outcomes).toEqual([
        { file: '005_event_merge_base.sql', outcome: 'applied', skipped: false },
        { file: '006_snapshot_merge_base.sql', outcome: 'applied', skipped: false },
      ])
      expect(await tableSettings(server, 'events')).toContain('merge_selector_base = 20')
      expect((await recordedOutcomes(server))['006_snapshot_merge_base.sql']).toMatchObject({ outcome: 'applied', server_version: '24.11.1.2557' })
      // And a start after that runs no migration file at all.
      expect(await migrateClickHouse(server)).toEqual([])
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)

  it('refuses a server older than 24.3 with a message naming the version', async () => {
    const server = serverAt(await shimOf('23.8.16.16'), newDatabase())
    await expect(migrateClickHouse(server)).rejects.toThrow('the ClickHouse server at CLICKHOUSE_URL runs version 23.8.16.16; the service needs 24.3 or later')
  }, 60_000)
})

describe('connections by role', () => {
  /** A statement that holds its connection ~0.6 s. */
  const slow = (ch: ClickHouse) => ch.client.query({ query: 'SELECT sum(sleepEachRow(0.3)) AS s FROM numbers(2) SETTINGS max_block_size = 1', format: 'JSONEachRow' }).then((r) => r.json())

  it('holds a process to its pool, and gives the connection beside (the sweep) a pool of its own', async () => {
    const shim = await shimOf('24.8.14.39')
    const server = serverAt(shim, 'default', { maxOpenConnections: 2 })
    await shim.reset()
    await Promise.all([slow(server), slow(server), slow(server), slow(server), slow(server.beside('history-sweep'))])
    // Four statements over two connections, and the one beside running with them (sharing the pool, it would wait: 2).
    expect(await shim.mostAtOnce()).toBe(3)
  }, 60_000)
})
