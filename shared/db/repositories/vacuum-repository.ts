import { query, type Queryable } from '../pool.js'

/** Tables every track batch rewrites rows of: the ones whose dead rows slow ingestion down first. */
export const HotTables = ['profiles', 'profile_aliases', 'applied_jobs'] as const

/** Whether the server's autovacuum daemon runs (`autovacuum` and the statistics it needs, `track_counts`). */
export async function autovacuumEnabled(db: Queryable): Promise<boolean> {
  const { rows } = await query<{ autovacuum: string; track_counts: string }>(
    db,
    'autovacuumEnabled',
    `SELECT current_setting('autovacuum') AS autovacuum, current_setting('track_counts') AS track_counts`,
  )
  return rows[0].autovacuum === 'on' && rows[0].track_counts === 'on'
}

export interface TableRows {
  table: string
  live: number
  dead: number
}

/** Live and dead row estimates of the hot tables (`pg_stat_user_tables`). */
export async function hotTableRows(db: Queryable): Promise<TableRows[]> {
  const { rows } = await query<{ relname: string; live: string; dead: string }>(
    db,
    'hotTableRows',
    `SELECT relname, n_live_tup AS live, n_dead_tup AS dead FROM pg_stat_user_tables
      WHERE schemaname = current_schema() AND relname = ANY($1::text[]) ORDER BY relname`,
    [HotTables],
  )
  return rows.map((r) => ({ table: r.relname, live: Number(r.live), dead: Number(r.dead) }))
}
