import type pg from 'pg'
import { query, type Pool } from '../pool.js'

const CLICKHOUSE_MIGRATION_LOCK = 724155

/**
 * Runs `fn` (the ClickHouse migrations) while holding an advisory lock of this deployment's
 * database, waiting for it: processes starting at once migrate ClickHouse one after another, so
 * the later ones find the work recorded and a column is filled in by one mutation, not one per
 * process. The lock lives on a connection closed afterwards, and dies with a process that dies.
 */
export async function withClickHouseMigrationLock<T>(pool: Pool, fn: () => Promise<T>): Promise<T> {
  const client: pg.PoolClient = await pool.connect()
  try {
    await query(client, 'clickhouseMigrationLock', 'SELECT pg_advisory_lock($1)', [CLICKHOUSE_MIGRATION_LOCK])
    return await fn()
  } finally {
    client.release(true)
  }
}
