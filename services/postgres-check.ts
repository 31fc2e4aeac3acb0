import { autovacuumEnabled, hotTableRows } from '../shared/db/repositories/vacuum-repository.js'
import type { Pool } from '../shared/db/pool.js'
import type { Logger } from '../shared/logger.js'

/**
 * A hot table with more dead rows than this share of all its rows is reported at start (the
 * alert PostgresHotTableBloated in infra/prometheus/alerts.yml uses the same two figures).
 */
const DEAD_SHARE_WARNING = 0.2
/** Below this many dead rows a table is small enough that its share says nothing. */
const DEAD_ROWS_FLOOR = 10_000

export interface HotTableVacuum {
  table: string
  dead: number
  live: number
  /** Dead rows over all rows (0 for an empty table). */
  deadShare: number
}

/** Whether autovacuum runs, and the dead rows of each hot table. */
export async function readVacuumState(pg: Pool): Promise<{ autovacuum: boolean; tables: HotTableVacuum[] }> {
  const [autovacuum, tables] = await Promise.all([autovacuumEnabled(pg), hotTableRows(pg)])
  return { autovacuum, tables: tables.map((t) => ({ ...t, deadShare: t.dead / Math.max(1, t.live + t.dead) })) }
}

/**
 * Track batches rewrite profile rows and write ledger rows: without vacuum their dead versions pile up
 * and every read and write of those tables slows down with them (docs/operations.md, Postgres).
 * Warn when autovacuum is off, and when a hot table already carries many dead rows.
 */
export async function warnAboutPostgresVacuum(pg: Pool, logger: Logger): Promise<void> {
  try {
    const state = await readVacuumState(pg)
    if (!state.autovacuum) {
      logger.warn(
        'Postgres autovacuum is off (autovacuum or track_counts): dead rows of profiles and the job ledger pile up and ingestion slows down ' +
          'with them; turn it on, or run VACUUM ANALYZE on a schedule',
      )
    }
    for (const t of state.tables) {
      if (t.dead >= DEAD_ROWS_FLOOR && t.deadShare > DEAD_SHARE_WARNING) {
        logger.warn(
          { table: t.table, dead_rows: t.dead, live_rows: t.live },
          `Postgres table ${t.table} is ${Math.round(t.deadShare * 100)}% dead rows: run VACUUM ANALYZE ${t.table} (and check autovacuum)`,
        )
      }
    }
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'could not read Postgres settings to check vacuum')
  }
}
