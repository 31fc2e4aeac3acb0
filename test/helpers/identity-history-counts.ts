// Reads an identity crash test's outcome out of a stopped worker's embedded ClickHouse, in a process
// of its own (chDB binds one directory per process): the events each given profile shows, then,
// after one history sweep, the rows physically left for the kept, merged and erased profiles.
// Usage: tsx identity-history-counts.ts <dataDir> <database> <workspaceId> <databaseUrl> <json {kept, merged, erased}>
import path from 'node:path'
import { openClickHouse } from '../../shared/clickhouse/client.js'
import { countEvents } from '../../shared/clickhouse/event-repository.js'
import { loadConfig } from '../../shared/config.js'
import { createPool } from '../../shared/db/pool.js'
import { createLogger } from '../../shared/logger.js'
import { sweepHistory } from '../../workers/identity/sweep.js'

const [dataDir, database, workspaceId, databaseUrl, ids] = process.argv.slice(2)
const { kept, merged, erased } = JSON.parse(ids) as { kept: number[]; merged: number[]; erased: number[] }
const ch = openClickHouse({ dataDir: path.join(dataDir, 'clickhouse'), database })
const pg = createPool(databaseUrl, 2)
const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' })

const visible: Record<number, number> = {}
for (const id of kept) visible[id] = (await countEvents(ch, workspaceId, [id])).reduce((n, c) => n + c.n, 0)
const swept = await sweepHistory({ pg, clickhouse: ch, config, logger: createLogger('silent') })
const raw = async (table: string, profiles: number[]) => {
  const rs = await ch.client.query({
    query: `SELECT count() AS n, uniqExact(${table === 'events' ? 'event_id' : 'version'}) AS u FROM ${database}.${table}
             WHERE profile_id IN {ids:Array(UInt64)} SETTINGS apply_deleted_mask = 0`,
    query_params: { ids: profiles },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ n: string; u: string }>()
  return { rows: Number(row.n), unique: Number(row.u) }
}
console.log(
  JSON.stringify({
    visible,
    swept,
    keptEvents: await raw('events', kept),
    mergedEvents: await raw('events', merged),
    erasedEvents: await raw('events', erased),
    erasedSnapshots: await raw('profile_snapshots', erased),
  }),
)
await pg.end()
await ch.close()
