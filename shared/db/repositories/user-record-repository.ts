import { storedRecordOf, type ProfileParts, type StoredRecord } from '../../domain/user-record.js'
import { query, type Queryable } from '../pool.js'
import { SELECT_PROFILE, profileOfRow, type ProfileRow } from './profile-repository.js'

type RecordRow = ProfileRow & { [K in keyof ProfileParts]?: ProfileParts[K] | null }

/**
 * `from` (profiles, or only their ids, as `p`) joined to the parts of each profile's stored
 * record, for the profiles whose ids satisfy `ids` (e.g. `= ANY($1::bigint[])`): one round trip
 * for everything a record needs (each query costs a system call pair, which on small machines
 * weighs more than the query). Each part is one grouped scan; as correlated subqueries they ran
 * three plans per profile (`EXPLAIN ANALYZE`, a 3,500-profile batch's locking read: 95 -> 82 ms).
 */
const withParts = (from: string, ids: string) => `${from}
  LEFT JOIN (SELECT a.profile_id, json_agg(json_build_object('alias_name', a.alias_name, 'alias_label', a.alias_label)
                      ORDER BY a.alias_label COLLATE "C", a.alias_name COLLATE "C") AS aliases
               FROM profile_aliases a WHERE a.profile_id ${ids} GROUP BY a.profile_id) al ON al.profile_id = p.id
  LEFT JOIN (SELECT t.profile_id, json_agg(json_build_object('app_id', t.app_id, 'token', t.token, 'device_id', t.device_id)
                      ORDER BY t.created_at, t.token) AS tokens
               FROM push_tokens t WHERE t.profile_id ${ids} GROUP BY t.profile_id) tk ON tk.profile_id = p.id
  LEFT JOIN (SELECT g.profile_id, json_agg(json_build_object('subscription_group_id', g.group_id, 'subscription_state', g.state)
                      ORDER BY g.group_id) AS subscriptions
               FROM profile_subscriptions g WHERE g.profile_id ${ids} GROUP BY g.profile_id) sg ON sg.profile_id = p.id`
const PART_COLUMNS = 'al.aliases, tk.tokens, sg.subscriptions'

/** A row's record parts (a part the profile has none of reads back as null). */
const partsOfRow = (row: Partial<Pick<RecordRow, keyof ProfileParts>>): ProfileParts => ({
  aliases: row.aliases ?? [],
  tokens: row.tokens ?? [],
  subscriptions: row.subscriptions ?? [],
})

/** The profiles whose ids are $1. */
const BY_IDS = '= ANY($1::bigint[])'

/** The stored record of each profile (its summaries are the event history's), for its snapshot and /users/export/ids; in id order. */
export async function loadStoredRecords(db: Queryable, profileIds: number[]): Promise<{ record: StoredRecord; profile: ProfileRow }[]> {
  if (profileIds.length === 0) return []
  const r = await query<RecordRow>(
    db,
    'loadStoredRecords',
    `${SELECT_PROFILE}, ${PART_COLUMNS} FROM ${withParts('profiles p', BY_IDS)} WHERE p.id ${BY_IDS} ORDER BY p.id`,
    [profileIds],
  )
  return r.rows.map((row) => {
    const profile = profileOfRow(row)
    return { record: storedRecordOf(profile, partsOfRow(row)), profile }
  })
}

/**
 * The parts of the stored records of profiles the caller holds locked (`lockProfilesToChange`,
 * which read their rows), so a batch can build their snapshots in memory. Read by a statement
 * after the locks are held, so each profile's parts are as the last transaction holding it left
 * them.
 */
export async function loadRecordParts(db: Queryable, profiles: ProfileRow[]): Promise<{ profile: ProfileRow; parts: ProfileParts }[]> {
  if (profiles.length === 0) return []
  // Only profiles with a part come back: most have none, and a row each was most of the statement's cost to the worker.
  const r = await query<Pick<RecordRow, 'id' | keyof ProfileParts>>(
    db,
    'loadRecordParts',
    `SELECT p.id, ${PART_COLUMNS} FROM ${withParts('unnest($1::bigint[]) AS p(id)', BY_IDS)}
      WHERE al.aliases IS NOT NULL OR tk.tokens IS NOT NULL OR sg.subscriptions IS NOT NULL`,
    [profiles.map((p) => p.id)],
  )
  const parts = new Map(r.rows.map((row) => [row.id, partsOfRow(row)]))
  return profiles.map((profile) => ({ profile, parts: parts.get(profile.id) ?? partsOfRow({}) }))
}
