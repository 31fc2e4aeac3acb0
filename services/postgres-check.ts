import { autovacuumEnabled, hotTableRows } from '../shared/db/repositories/vacuum-repository.js'
import type { Pool } from '../shared/db/pool.js'
import type { Logger } from '../shared/logger.js'

/** A hot table with more dead rows than this share of all its rows is reported at start. */
const DEAD_SHARE_WARNING = 0.2
/** Below this many dead rows a table is small enough that its share says nothing. */
const DEAD_ROWS_FLOOR = 10_000

/**
 * Every track batch rewrites profile and summary rows: without vacuum their dead versions pile up
 * and every read and write of those tables slows down with them (docs/operations.md, Postgres).
 * Warn when autovacuum is off, and when a hot table already carries many dead rows.
 */
export async function warnAboutPostgresVacuum(pg: Pool, logger: Logger): Promise<void> {
  try {
    if (!(await autovacuumEnabled(pg))) {
      logger.warn(
        'Postgres autovacuum is off (autovacuum or track_counts): dead rows of profiles and summaries pile up and ingestion slows down ' +
          'with them; turn it on, or run VACUUM ANALYZE on a schedule',
      )
    }
    for (const t of await hotTableRows(pg)) {
      const share = t.dead / Math.max(1, t.live + t.dead)
      if (t.dead >= DEAD_ROWS_FLOOR && share > DEAD_SHARE_WARNING) {
        logger.warn(
          { table: t.table, dead_rows: t.dead, live_rows: t.live },
          `Postgres table ${t.table} is ${Math.round(share * 100)}% dead rows: run VACUUM ANALYZE ${t.table} (and check autovacuum)`,
        )
      }
    }
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'could not read Postgres settings to check vacuum')
  }
}
