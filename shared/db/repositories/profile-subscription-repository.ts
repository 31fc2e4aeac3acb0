import { query, type Queryable } from '../pool.js'

export interface ProfileSubscription {
  profile_id: number
  group_id: string
  state: 'subscribed' | 'unsubscribed'
}

/** Sets group states; the last write (in the order jobs apply) wins. */
export async function upsertProfileSubscriptions(db: Queryable, rows: ProfileSubscription[]): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'upsertProfileSubscriptions',
    `INSERT INTO profile_subscriptions (profile_id, group_id, state, updated_at)
     SELECT DISTINCT ON (r.profile_id, r.group_id) r.profile_id, r.group_id, r.state, now()
       FROM json_to_recordset($1::json) AS r(profile_id bigint, group_id text, state text, n bigint)
      ORDER BY r.profile_id, r.group_id, r.n DESC
     ON CONFLICT (profile_id, group_id) DO UPDATE SET state = excluded.state, updated_at = now()`,
    [JSON.stringify(rows.map((row, n) => ({ ...row, n })))],
  )
}
