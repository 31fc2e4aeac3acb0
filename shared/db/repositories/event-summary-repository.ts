import { isoText, query, type Queryable } from '../pool.js'

export interface EventSummaryDelta {
  profile_id: number
  kind: 'event' | 'purchase'
  name: string
  first_at: string
  last_at: string
  count: number
}

/**
 * Adds occurrences to per-user summaries: counts summed, earliest first, latest last, stamped as
 * applied now. Rows are written in key order: batches of two partitions may add to one user's
 * summaries at once (its profile is only key-share locked), and waiting in one order never deadlocks.
 */
export async function addEventSummaries(db: Queryable, deltas: EventSummaryDelta[]): Promise<void> {
  if (deltas.length === 0) return
  await query(
    db,
    'addEventSummaries',
    `INSERT INTO profile_event_summaries (profile_id, kind, name, first_at, last_at, count, applied_at)
     SELECT r.profile_id, r.kind, r.name, r.first_at, r.last_at, r.count, now()
       FROM json_to_recordset($1::json) AS r(profile_id bigint, kind text, name text, first_at timestamptz, last_at timestamptz, count bigint)
      ORDER BY r.profile_id, r.kind, r.name
     ON CONFLICT (profile_id, kind, name) DO UPDATE SET
       count = profile_event_summaries.count + excluded.count,
       first_at = LEAST(profile_event_summaries.first_at, excluded.first_at),
       last_at = GREATEST(profile_event_summaries.last_at, excluded.last_at),
       applied_at = excluded.applied_at`,
    [JSON.stringify(deltas)],
  )
}

/**
 * Folds merged profiles' summaries into the kept ones' (no profile appears in two pairs). The
 * merged profiles' own rows go when those profiles are deleted, in the same transaction.
 */
export async function moveEventSummaries(db: Queryable, pairs: { from: number; to: number }[]): Promise<void> {
  if (pairs.length === 0) return
  await query(
    db,
    'moveEventSummaries',
    `INSERT INTO profile_event_summaries (profile_id, kind, name, first_at, last_at, count, applied_at)
     SELECT m.to_id, s.kind, s.name, s.first_at, s.last_at, s.count, s.applied_at
       FROM profile_event_summaries s JOIN unnest($1::bigint[], $2::bigint[]) AS m(from_id, to_id) ON s.profile_id = m.from_id
     ON CONFLICT (profile_id, kind, name) DO UPDATE SET
       count = profile_event_summaries.count + excluded.count,
       first_at = LEAST(profile_event_summaries.first_at, excluded.first_at),
       last_at = GREATEST(profile_event_summaries.last_at, excluded.last_at),
       applied_at = GREATEST(profile_event_summaries.applied_at, excluded.applied_at)`,
    [pairs.map((p) => p.from), pairs.map((p) => p.to)],
  )
}

/**
 * When each profile last had an event or purchase applied (ISO 8601 UTC with milliseconds, as
 * profile rows give `updated_at`); profiles with none since the column came are absent.
 */
export async function lastOccurrences(db: Queryable, profileIds: number[]): Promise<Map<number, string>> {
  if (profileIds.length === 0) return new Map()
  const r = await query<{ profile_id: number; at: string }>(
    db,
    'lastOccurrences',
    `SELECT profile_id, ${isoText('max(applied_at)')} AS at
       FROM profile_event_summaries WHERE profile_id = ANY($1::bigint[]) AND applied_at IS NOT NULL GROUP BY profile_id`,
    [profileIds],
  )
  return new Map(r.rows.map((row) => [row.profile_id, row.at]))
}
