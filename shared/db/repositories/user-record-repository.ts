import type { EventSummary, UserRecord } from '../../domain/user-record.js'
import { query, type Queryable } from '../pool.js'
import { SELECT_PROFILE, type ProfileRow } from './profile-repository.js'

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

interface RecordRow extends ProfileRow {
  aliases: { alias_name: string; alias_label: string }[] | null
  tokens: { app_id: string; token: string; device_id: string | null }[] | null
  summaries: (EventSummary & { kind: string })[] | null
  subscriptions: { subscription_group_id: string; subscription_state: string }[] | null
}

/**
 * One round trip for everything a record needs: each query costs a system call pair, which on
 * small machines weighs more than the query itself.
 */
const SELECT_RECORDS = `${SELECT_PROFILE},
  (SELECT json_agg(json_build_object('alias_name', a.alias_name, 'alias_label', a.alias_label) ORDER BY a.alias_label, a.alias_name)
     FROM profile_aliases a WHERE a.profile_id = p.id) AS aliases,
  (SELECT json_agg(json_build_object('app_id', t.app_id, 'token', t.token, 'device_id', t.device_id) ORDER BY t.created_at, t.token)
     FROM push_tokens t WHERE t.profile_id = p.id) AS tokens,
  (SELECT json_agg(json_build_object('kind', s.kind, 'name', s.name, 'count', s.count,
            'first', to_char(s.first_at AT TIME ZONE 'UTC', ${ISO}), 'last', to_char(s.last_at AT TIME ZONE 'UTC', ${ISO})) ORDER BY s.name)
     FROM profile_event_summaries s WHERE s.profile_id = p.id) AS summaries,
  (SELECT json_agg(json_build_object('subscription_group_id', g.group_id, 'subscription_state', g.state) ORDER BY g.group_id)
     FROM profile_subscriptions g WHERE g.profile_id = p.id) AS subscriptions
  FROM profiles p WHERE p.id = ANY($1::bigint[]) ORDER BY p.id`

const OPTIONAL_FIELDS = [
  'first_name', 'last_name', 'email', 'home_city', 'time_zone', 'dob', 'country', 'phone', 'language', 'gender',
  'push_subscribe', 'email_subscribe', 'push_opted_in_at',
] as const

function toRecord(p: RecordRow): UserRecord {
  const record: UserRecord = { created_at: p.created_at, service_id: p.service_id, random_bucket: p.random_bucket }
  if (p.external_id !== null) record.external_id = p.external_id
  if (p.aliases) record.user_aliases = p.aliases
  for (const f of OPTIONAL_FIELDS) if (p[f] !== null) record[f] = p[f]!
  if (Object.keys(p.custom_attributes).length) record.custom_attributes = p.custom_attributes
  const summaries = (kind: string) =>
    (p.summaries ?? []).filter((s) => s.kind === kind).map(({ name, first, last, count }) => ({ name, first, last, count: Number(count) }))
  const events = summaries('event')
  const purchases = summaries('purchase')
  if (events.length) record.custom_events = events
  if (purchases.length) record.purchases = purchases
  if (p.tokens) {
    record.push_tokens = p.tokens.map((t) => ({
      app: t.app_id,
      token: t.token,
      ...(t.device_id !== null && { device_id: t.device_id }),
      notifications_enabled: p.push_subscribe !== 'unsubscribed',
    }))
  }
  if (p.subscriptions) record.subscription_groups = p.subscriptions
  return record
}

/** Builds the stored user record of each profile (all-time summaries), keyed by profile id. */
export async function loadUserRecords(db: Queryable, profileIds: number[]): Promise<Map<number, { record: UserRecord; profile: ProfileRow }>> {
  const out = new Map<number, { record: UserRecord; profile: ProfileRow }>()
  if (profileIds.length === 0) return out
  const r = await query<RecordRow>(db, 'loadUserRecords', SELECT_RECORDS, [profileIds])
  for (const row of r.rows) {
    const { aliases: _a, tokens: _t, summaries: _s, subscriptions: _g, ...profile } = row
    out.set(row.id, { record: toRecord(row), profile })
  }
  return out
}
