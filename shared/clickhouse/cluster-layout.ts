/**
 * How the migrations' tables sit on a cluster (CLICKHOUSE_CLUSTER, docs/clickhouse.md). The
 * history tables are sharded by profile: a Replicated table `<name>_local` on every node holds its
 * shard's rows, and a Distributed table with the usual name over them is what queries and inserts
 * name, so the read SQL is the same as on one server. Every row of one profile (its events, its
 * snapshots, the overrides leading from it) lands on one shard, by the same hash of the profile id,
 * so FINAL, which collapses rows within a shard, sees all of a key's rows. Any other table is
 * present whole on every node (one Replicated table whose replicas are all the nodes).
 */

/** The column each sharded table is sharded by: the profile its rows belong to. */
export const SHARDED_BY: Readonly<Record<string, string>> = {
  events: 'profile_id',
  profile_snapshots: 'profile_id',
  profile_overrides: 'old_profile_id',
}

export const localTable = (table: string) => `${table}_local`

/** The Distributed tables' sharding key: one function of the profile id for every table. */
export const shardingKey = (column: string) => `intHash64(${column})`

/** The cluster as SQL names it: a string literal (the name is checked by config: letters, digits, `_ . -`). */
export const clusterLiteral = (cluster: string) => `'${cluster}'`

export interface ClusterTarget {
  database: string
  cluster: string
}

const CREATE_DATABASE = /^CREATE DATABASE IF NOT EXISTS (\w+)$/s
const CREATE_TABLE = /^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+)\s*(\(.*\))\s*ENGINE\s*=\s*(\w*)MergeTree(?:\(([^()]*)\))?(.*)$/s
const ALTER_TABLE = /^ALTER TABLE (\w+)\.(\w+)\s+(.*)$/s
/** ALTERs that change columns: a Distributed table mirrors its local table's columns, so it is altered too. */
const COLUMN_CHANGE = /\b(ADD|DROP|MODIFY|RENAME|COMMENT) COLUMN\b/i

/**
 * A migration statement (its `{db}` filled in) as the cluster runs it: one or more statements,
 * each ON CLUSTER. CREATE TABLE of a MergeTree-family engine becomes its Replicated form; any other
 * statement (an INSERT into a table present on every node, say) runs as written on the node the
 * service talks to.
 */
export function onCluster(statement: string, t: ClusterTarget): string[] {
  const on = `ON CLUSTER ${clusterLiteral(t.cluster)}`
  const db = CREATE_DATABASE.exec(statement)
  if (db) return [`CREATE DATABASE IF NOT EXISTS ${db[1]} ${on}`]
  const create = CREATE_TABLE.exec(statement)
  if (create) {
    const [, database, table, columns, family, args, rest] = create
    const engineArgs = (path: string, replica: string) => [`'${path}'`, `'${replica}'`, ...(args?.trim() ? [args.trim()] : [])].join(', ')
    const shardBy = SHARDED_BY[table]
    if (!shardBy) {
      const path = `/clickhouse/tables/${database}/${table}`
      // Every node is a replica of this one table: {shard}-{replica} is unique across the cluster where {replica} alone may not be.
      return [`CREATE TABLE IF NOT EXISTS ${database}.${table} ${on} ${columns} ENGINE = Replicated${family}MergeTree(${engineArgs(path, '{shard}-{replica}')})${rest}`]
    }
    const local = localTable(table)
    const path = `/clickhouse/tables/{shard}/${database}/${local}`
    return [
      `CREATE TABLE IF NOT EXISTS ${database}.${local} ${on} ${columns} ENGINE = Replicated${family}MergeTree(${engineArgs(path, '{replica}')})${rest}`,
      `CREATE TABLE IF NOT EXISTS ${database}.${table} ${on} AS ${database}.${local} ENGINE = Distributed(${clusterLiteral(t.cluster)}, '${database}', '${local}', ${shardingKey(shardBy)})`,
    ]
  }
  const alter = ALTER_TABLE.exec(statement)
  if (alter) {
    const [, database, table, change] = alter
    if (!SHARDED_BY[table]) return [`ALTER TABLE ${database}.${table} ${on} ${change}`]
    const local = `ALTER TABLE ${database}.${localTable(table)} ${on} ${change}`
    return COLUMN_CHANGE.test(change) ? [local, `ALTER TABLE ${database}.${table} ${on} ${change}`] : [local]
  }
  return [statement]
}
