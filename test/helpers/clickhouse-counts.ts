// Reads event counts (in all, and per profile, kind and name) out of an embedded ClickHouse data directory in a process of its own
// (chDB binds one directory per process). Usage: tsx clickhouse-counts.ts <dataDir> <database> <workspaceId>
import { openClickHouse } from '../../shared/clickhouse/client.js'

const [dataDir, database, workspaceId] = process.argv.slice(2)
const ch = openClickHouse({ dataDir, database })
const run = async (sql: string) => {
  const rs = await ch.client.query({ query: sql, query_params: { ws: workspaceId }, format: 'JSONEachRow' })
  return rs.json<Record<string, string>>()
}
const visible = await run(`SELECT kind, count() AS n FROM ${database}.events FINAL WHERE workspace_id = {ws:String} GROUP BY kind ORDER BY kind`)
const physical = await run(`SELECT count() AS n FROM ${database}.events WHERE workspace_id = {ws:String}`)
const snapshots = await run(`SELECT count() AS n FROM ${database}.profile_snapshots FINAL WHERE workspace_id = {ws:String}`)
const perProfile = await run(
  `SELECT profile_id, kind, name, count() AS n FROM ${database}.events FINAL WHERE workspace_id = {ws:String} GROUP BY profile_id, kind, name`,
)
console.log(
  JSON.stringify({
    visible,
    physical: Number(physical[0].n),
    snapshots: Number(snapshots[0].n),
    perProfile: perProfile.map((r) => ({ profileId: Number(r.profile_id), kind: r.kind, name: r.name, n: Number(r.n) })),
  }),
)
await ch.close()
