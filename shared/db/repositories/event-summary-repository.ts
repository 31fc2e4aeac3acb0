import { query, type Queryable } from '../pool.js'

export interface EventSummaryDelta {
  profile_id: number
  kind: 'event' | 'purchase'
  name: string
  first_at: string
  last_at: string
  count: number
}

/** Adds occurrences to per-user summaries: counts summed, earliest first, latest last. */
export async function addEventSummaries(db: Queryable, deltas: EventSummaryDelta[]): Promise<void> {
  if (deltas.length === 0) return
  await query(
    db,
    'addEventSummaries',
    `INSERT INTO profile_event_summaries (profile_id, kind, name, first_at, last_at, count)
     SELECT r.profile_id, r.kind, r.name, r.first_at, r.last_at, r.count
       FROM jsonb_to_recordset($1::jsonb) AS r(profile_id bigint, kind text, name text, first_at timestamptz, last_at timestamptz, count bigint)
     ON CONFLICT (profile_id, kind, name) DO UPDATE SET
       count = profile_event_summaries.count + excluded.count,
       first_at = LEAST(profile_event_summaries.first_at, excluded.first_at),
       last_at = GREATEST(profile_event_summaries.last_at, excluded.last_at)`,
    [JSON.stringify(deltas)],
  )
}

/** Folds one profile's summaries into another's (a merge). */
export async function moveEventSummaries(db: Queryable, fromProfile: number, toProfile: number): Promise<void> {
  await query(
    db,
    'moveEventSummaries',
    `INSERT INTO profile_event_summaries (profile_id, kind, name, first_at, last_at, count)
     SELECT $2, kind, name, first_at, last_at, count FROM profile_event_summaries WHERE profile_id = $1
     ON CONFLICT (profile_id, kind, name) DO UPDATE SET
       count = profile_event_summaries.count + excluded.count,
       first_at = LEAST(profile_event_summaries.first_at, excluded.first_at),
       last_at = GREATEST(profile_event_summaries.last_at, excluded.last_at)`,
    [fromProfile, toProfile],
  )
  await query(db, 'deleteMovedSummaries', 'DELETE FROM profile_event_summaries WHERE profile_id = $1', [fromProfile])
}
