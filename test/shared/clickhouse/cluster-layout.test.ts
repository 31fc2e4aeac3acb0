// What of the cluster path (CLICKHOUSE_CLUSTER) can be checked without a cluster: the DDL and the
// sweep's statements it generates, parsed by the embedded engine's own parser (chDB, the same
// parser as a 26.x server); its insert settings, run; its read SQL is the single-server read SQL
// (every subquery GLOBAL), which every other test runs on the embedded engine.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { localTable, onCluster, SHARDED_BY, shardingKey } from '../../../shared/clickhouse/cluster-layout.js'
import { CLUSTER_MUTATION_IDS_TEXT, erasureStatements, mutationStateSql } from '../../../shared/clickhouse/history-repository.js'
import { firstStartDdl } from '../../../shared/clickhouse/migrate.js'
import { clusterInsertSettings } from '../../../shared/clickhouse/server.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

const CLUSTER = { database: 'userdata', cluster: 'analytics' }

/** The statement as the engine's parser reads it back (formatQuery): throws on a syntax error. */
async function parsed(sql: string): Promise<string> {
  const rs = await env.clickhouse.client.query({ query: 'SELECT formatQuery({sql:String}) AS f', query_params: { sql }, format: 'JSONEachRow' })
  return (await rs.json<{ f: string }>())[0].f
}

describe('the cluster layout', () => {
  it('creates every table ON CLUSTER: the history tables as Replicated local tables behind Distributed ones sharded by profile, the rest replicated on every node', async () => {
    const ddl = await firstStartDdl(CLUSTER, { version: '24.8.14.39' })
    await expect(parsed('CREATE TABLE userdata.x ON CLUSTER c ENGINE = ReplicatedMergeTree(')).rejects.toThrow(/Syntax error/)
    for (const statement of ddl) {
      expect(statement).toContain("ON CLUSTER 'analytics'")
      await parsed(statement)
    }
    const creates = ddl.filter((s) => s.startsWith('CREATE TABLE'))
    for (const [table, column] of Object.entries(SHARDED_BY)) {
      const local = creates.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS userdata.${localTable(table)} `))!
      expect(local).toMatch(new RegExp(`ENGINE = ReplicatedReplacingMergeTree\\('/clickhouse/tables/\\{shard\\}/userdata/${table}_local', '\\{replica\\}'`))
      const distributed = creates.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS userdata.${table} `))!
      expect(distributed).toBe(
        `CREATE TABLE IF NOT EXISTS userdata.${table} ON CLUSTER 'analytics' AS userdata.${table}_local ENGINE = Distributed('analytics', 'userdata', '${table}_local', ${shardingKey(column)})`,
      )
    }
    // One function of the profile id shards every table: a profile's events, snapshots and overrides share a shard.
    expect(new Set(Object.values(SHARDED_BY).map((c) => shardingKey(c).replace(c, 'x')))).toEqual(new Set(['intHash64(x)']))
    // The record of migrations is one table whose replicas are all the nodes.
    expect(creates.find((s) => s.includes('clickhouse_migrations'))).toContain(
      "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/userdata/clickhouse_migrations', '{shard}-{replica}', recorded_at)",
    )
    // Table settings go to the local tables, column changes to both, the fill-in mutation to the local one.
    const alters = ddl.filter((s) => s.startsWith('ALTER'))
    expect(alters.filter((s) => s.includes('MODIFY SETTING')).every((s) => /^ALTER TABLE userdata\.\w+_local ON CLUSTER/.test(s))).toBe(true)
    expect(alters.filter((s) => s.includes('ADD COLUMN')).map((s) => s.split(' ON ')[0])).toEqual([
      'ALTER TABLE userdata.profile_snapshots_local',
      'ALTER TABLE userdata.profile_snapshots',
    ])
    expect(alters.filter((s) => s.includes('MATERIALIZE COLUMN')).map((s) => s.split(' ON ')[0])).toEqual(['ALTER TABLE userdata.profile_snapshots_local'])
  })

  it('is the DDL docs/clickhouse.md shows', async () => {
    const doc = readFileSync(path.resolve(import.meta.dirname, '../../../docs/clickhouse.md'), 'utf8')
    const block = doc.slice(doc.indexOf("### The cluster's DDL")).split('```sql\n')[1].split('```')[0]
    const ddl = await firstStartDdl(CLUSTER, { version: '24.11.1.2557' })
    expect(block).toBe(ddl.map((s) => `${s};`).join('\n\n') + '\n')
  })

  it('plans the 24.11 migrations only on 24.11 and later', async () => {
    const before = await firstStartDdl(CLUSTER, { version: '24.8.14.39' })
    const after = await firstStartDdl(CLUSTER, { version: '24.11.1.2557' })
    expect(before.some((s) => s.includes('merge_selector_base'))).toBe(false)
    expect(after.filter((s) => s.includes('merge_selector_base'))).toEqual([
      "ALTER TABLE userdata.events_local ON CLUSTER 'analytics' MODIFY SETTING merge_selector_base = 20",
      "ALTER TABLE userdata.profile_snapshots_local ON CLUSTER 'analytics' MODIFY SETTING merge_selector_base = 20",
    ])
  })

  it('leaves a statement it does not place as written, and lays out a table it does not know on every node', () => {
    expect(onCluster("INSERT INTO userdata.deployment VALUES ('x')", CLUSTER)).toEqual(["INSERT INTO userdata.deployment VALUES ('x')"])
    expect(onCluster('CREATE TABLE IF NOT EXISTS userdata.deployment (id String) ENGINE = MergeTree ORDER BY id', CLUSTER)).toEqual([
      "CREATE TABLE IF NOT EXISTS userdata.deployment ON CLUSTER 'analytics' (id String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/userdata/deployment', '{shard}-{replica}') ORDER BY id",
    ])
  })
})

describe("the sweep's statements on a cluster", () => {
  it('mutate the local tables ON CLUSTER, in chunks a Keeper node holds, covering every id once', async () => {
    const ids = Array.from({ length: 100_000 }, (_, i) => 10_000_000_000 + i)
    const statements = erasureStatements(CLUSTER, 'profile_overrides', [{ workspaceId: 'w', profileIds: ids }])
    expect(statements.length).toBeGreaterThan(1)
    for (const s of statements) {
      expect(s.query).toMatch(/^ALTER TABLE userdata\.profile_overrides_local ON CLUSTER 'analytics' DELETE WHERE \{erasure:String\} != '' AND .* AND old_profile_id IN \{ids:Array\(UInt64\)\}$/)
      expect(String(s.params.ids).length).toBeLessThanOrEqual(CLUSTER_MUTATION_IDS_TEXT)
      await parsed(s.query)
    }
    expect(statements.flatMap((s) => s.params.ids as number[])).toEqual(ids)
    expect(new Set(statements.map((s) => s.marker)).size).toBe(statements.length)
    // On one server, one mutation takes them all.
    expect(erasureStatements({ database: 'userdata' }, 'profile_overrides', [{ workspaceId: 'w', profileIds: ids }])).toHaveLength(1)
  })

  it('wait for their mutation on every replica', async () => {
    const sql = mutationStateSql({ cluster: 'analytics' })
    expect(sql).toContain("FROM clusterAllReplicas('analytics', system.mutations)")
    await parsed(sql)
  })
})

describe('inserts on a cluster', () => {
  it('are foreground Distributed inserts held until every replica of a shard has the rows, with settings the engine knows', async () => {
    const settings = clusterInsertSettings({ name: 'analytics', shards: 3, hosts: 6, replicasPerShard: 2 })
    expect(settings).toEqual({ async_insert: 0, distributed_foreground_insert: 1, insert_quorum: 2, insert_quorum_timeout: 60_000 })
    expect(clusterInsertSettings({ name: 'analytics', shards: 2, hosts: 2, replicasPerShard: 1 })).toEqual({ async_insert: 0, distributed_foreground_insert: 1 })
    // Every one is a setting this engine knows (an unknown one is refused): the insert runs.
    const table = `${env.clickhouse.database}.cluster_settings_probe`
    await env.clickhouse.client.command({ query: `CREATE TABLE ${table} (x UInt8) ENGINE = MergeTree ORDER BY x` })
    await env.clickhouse.client.command({ query: `INSERT INTO ${table} SELECT 1`, clickhouse_settings: settings })
    const rs = await env.clickhouse.client.query({ query: `SELECT count() AS n FROM ${table}`, format: 'JSONEachRow' })
    expect(await rs.json()).toEqual([{ n: 1 }])
  })
})
