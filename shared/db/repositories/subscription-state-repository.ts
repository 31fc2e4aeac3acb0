import { query, type Queryable } from '../pool.js'

export type GroupState = 'subscribed' | 'unsubscribed'
export type EmailState = 'opted_in' | 'subscribed' | 'unsubscribed'
export type AddressKind = 'email' | 'phone'

export interface ProfileKeys {
  id: number
  external_id: string | null
  email: string | null
  phone: string | null
}

export interface ProfileGroupState {
  profile_id: number
  group_id: string
  state: GroupState
}

export interface AddressGroupState {
  group_id: string
  address: string
  state: GroupState
}

export interface AddressEmailState {
  email: string
  state: EmailState
}

/**
 * Row-locks every profile the keys name, in id order like the track worker's own lock, so
 * partitions touching the same profiles wait for each other instead of deadlocking.
 */
export async function lockProfilesByKeys(
  db: Queryable,
  workspaceId: string,
  keys: { externalIds: string[]; emails: string[]; phones: string[]; profileIds?: number[] },
): Promise<ProfileKeys[]> {
  const r = await query<ProfileKeys>(
    db,
    'lockProfilesByKeys',
    `SELECT id, external_id, email, phone FROM profiles
      WHERE workspace_id = $1 AND (external_id = ANY($2::text[]) OR email = ANY($3::text[]) OR phone = ANY($4::text[]) OR id = ANY($5::bigint[]))
      ORDER BY id FOR UPDATE`,
    [workspaceId, keys.externalIds, keys.emails, keys.phones, keys.profileIds ?? []],
  )
  return r.rows
}

/**
 * Writes group states, one row per (profile, group). Each write refreshes `updated_at` even when
 * the state stays the same, because states stored for an address only override older writes.
 * Returns the profiles whose state actually changed.
 */
export async function writeProfileGroupStates(db: Queryable, rows: ProfileGroupState[]): Promise<number[]> {
  if (rows.length === 0) return []
  const r = await query<{ profile_id: number }>(
    db,
    'writeProfileGroupStates',
    `WITH input AS (
       SELECT profile_id, group_id, state FROM json_to_recordset($1::json) AS r(profile_id bigint, group_id text, state text)
     ), before AS (
       SELECT s.profile_id, s.group_id, s.state FROM profile_subscriptions s JOIN input USING (profile_id, group_id)
     ), written AS (
       INSERT INTO profile_subscriptions (profile_id, group_id, state, updated_at)
       SELECT profile_id, group_id, state, now() FROM input
       ON CONFLICT (profile_id, group_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at
       RETURNING profile_id, group_id, state
     )
     SELECT DISTINCT w.profile_id FROM written w LEFT JOIN before b USING (profile_id, group_id)
      WHERE b.state IS DISTINCT FROM w.state`,
    [JSON.stringify(rows)],
  )
  return r.rows.map((x) => x.profile_id)
}

/** Keeps the latest group state of each email or phone, for profiles that get the address later. */
export async function writeAddressGroupStates(db: Queryable, workspaceId: string, rows: AddressGroupState[]): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'writeAddressGroupStates',
    `INSERT INTO address_subscriptions (workspace_id, group_id, address, state, updated_at)
     SELECT $1, group_id, address, state, now() FROM json_to_recordset($2::json) AS r(group_id text, address text, state text)
     ON CONFLICT (group_id, address) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
    [workspaceId, JSON.stringify(rows)],
  )
}

/**
 * Copies the group states stored for the profiles' addresses onto the profiles, where the stored
 * state is newer than the profile's own (a state set for this very profile later must stay).
 * The copy keeps the stored write time. Returns the profiles whose state changed.
 */
export async function copyAddressGroupStates(
  db: Queryable,
  workspaceId: string,
  owned: { profile_id: number; address: string }[],
): Promise<number[]> {
  if (owned.length === 0) return []
  const r = await query<{ profile_id: number }>(
    db,
    'copyAddressGroupStates',
    `WITH pending AS (
       SELECT DISTINCT ON (o.profile_id, a.group_id) o.profile_id, a.group_id, a.state, a.updated_at
         FROM unnest($2::bigint[], $3::text[]) AS o(profile_id, address)
         JOIN address_subscriptions a ON a.workspace_id = $1 AND a.address = o.address
        ORDER BY o.profile_id, a.group_id, a.updated_at DESC
     ), before AS (
       SELECT s.profile_id, s.group_id, s.state, s.updated_at FROM profile_subscriptions s JOIN pending USING (profile_id, group_id)
     ), written AS (
       INSERT INTO profile_subscriptions (profile_id, group_id, state, updated_at)
       SELECT p.profile_id, p.group_id, p.state, p.updated_at FROM pending p LEFT JOIN before b USING (profile_id, group_id)
        WHERE b.updated_at IS NULL OR p.updated_at > b.updated_at
       ON CONFLICT (profile_id, group_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at
       RETURNING profile_id, group_id, state
     )
     SELECT DISTINCT w.profile_id FROM written w LEFT JOIN before b USING (profile_id, group_id)
      WHERE b.state IS DISTINCT FROM w.state`,
    [workspaceId, owned.map((o) => o.profile_id), owned.map((o) => o.address)],
  )
  return r.rows.map((x) => x.profile_id)
}

/** Keeps the email subscription state uploaded for each address (/email/status). */
export async function writeEmailStates(db: Queryable, workspaceId: string, rows: AddressEmailState[]): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'writeEmailStates',
    `INSERT INTO email_states (workspace_id, email, state, updated_at)
     SELECT $1, email, state, now() FROM json_to_recordset($2::json) AS r(email text, state text)
     ON CONFLICT (workspace_id, email) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
    [workspaceId, JSON.stringify(rows)],
  )
}

/** Sets `email_subscribe` of every profile having one of the addresses; returns those it changed. */
export async function setEmailSubscribeByAddress(db: Queryable, workspaceId: string, rows: AddressEmailState[]): Promise<number[]> {
  if (rows.length === 0) return []
  const r = await query<{ id: number }>(
    db,
    'setEmailSubscribeByAddress',
    `UPDATE profiles p SET email_subscribe = r.state
       FROM json_to_recordset($2::json) AS r(email text, state text)
      WHERE p.workspace_id = $1 AND p.email = r.email AND p.email_subscribe IS DISTINCT FROM r.state
      RETURNING p.id`,
    [workspaceId, JSON.stringify(rows)],
  )
  return r.rows.map((x) => x.id)
}

/** Copies the email states uploaded for the profiles' addresses onto them; returns those it changed. */
export async function copyEmailStates(db: Queryable, workspaceId: string, owned: { profile_id: number; email: string }[]): Promise<number[]> {
  if (owned.length === 0) return []
  const r = await query<{ id: number }>(
    db,
    'copyEmailStates',
    `UPDATE profiles p SET email_subscribe = e.state
       FROM unnest($2::bigint[], $3::text[]) AS o(profile_id, email)
       JOIN email_states e ON e.workspace_id = $1 AND e.email = o.email
      WHERE p.id = o.profile_id AND p.email = o.email AND p.email_subscribe IS DISTINCT FROM e.state
      RETURNING p.id`,
    [workspaceId, owned.map((o) => o.profile_id), owned.map((o) => o.email)],
  )
  return r.rows.map((x) => x.id)
}

/** Group state of each external id: the profile's own row, if any. */
export async function readGroupStatesByExternalId(
  db: Queryable,
  workspaceId: string,
  groupId: string,
  externalIds: string[],
): Promise<Map<string, GroupState>> {
  const r = await query<{ key: string; state: GroupState }>(
    db,
    'readGroupStatesByExternalId',
    `SELECT p.external_id AS key, s.state FROM profiles p
       JOIN profile_subscriptions s ON s.profile_id = p.id AND s.group_id = $2
      WHERE p.workspace_id = $1 AND p.external_id = ANY($3::text[])
     UNION ALL
     SELECT d.external_id, s.state FROM deprecated_external_ids d
       JOIN profile_subscriptions s ON s.profile_id = d.profile_id AND s.group_id = $2
      WHERE d.workspace_id = $1 AND d.external_id = ANY($3::text[])`,
    [workspaceId, groupId, externalIds],
  )
  return new Map(r.rows.map((x) => [x.key, x.state]))
}

// Closed set: the column is chosen by the caller's kind, never by request text.
const addressColumn: Record<AddressKind, string> = { email: 'p.email', phone: 'p.phone' }

/**
 * Group state of each email or phone: the latest write among the profiles having the address and
 * the state stored for the address itself (set before any profile had it).
 */
export async function readGroupStatesByAddress(
  db: Queryable,
  workspaceId: string,
  { groupId, kind, addresses }: { groupId: string; kind: AddressKind; addresses: string[] },
): Promise<Map<string, GroupState>> {
  const column = addressColumn[kind]
  const r = await query<{ key: string; state: GroupState }>(
    db,
    'readGroupStatesByAddress',
    `SELECT DISTINCT ON (key) key, state FROM (
       SELECT ${column} AS key, s.state, s.updated_at FROM profiles p
         JOIN profile_subscriptions s ON s.profile_id = p.id AND s.group_id = $2
        WHERE p.workspace_id = $1 AND ${column} = ANY($3::text[])
       UNION ALL
       SELECT a.address, a.state, a.updated_at FROM address_subscriptions a
        WHERE a.workspace_id = $1 AND a.group_id = $2 AND a.address = ANY($3::text[])
     ) states
     ORDER BY key, updated_at DESC`,
    [workspaceId, groupId, addresses],
  )
  return new Map(r.rows.map((x) => [x.key, x.state]))
}

/** A user of /subscription/user/status: its keys and the groups it has a state in. */
export interface UserGroupStates {
  external_id: string | null
  email: string | null
  phone: string | null
  groups: { id: string; name: string; channel: string; state: GroupState }[]
}

/**
 * The users any of the keys names (an external id as a primary or a deprecated id), in id order,
 * one page of them with each one's group states, and how many there are in all.
 */
export async function readUserGroupStates(
  db: Queryable,
  workspaceId: string,
  keys: { externalIds: string[]; emails: string[]; phones: string[] },
  page: { limit: number; offset: number },
): Promise<{ total: number; users: UserGroupStates[] }> {
  const r = await query<{ total: number; users: UserGroupStates[] | null }>(
    db,
    'readUserGroupStates',
    `WITH matched AS (
       SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2::text[])
       UNION SELECT profile_id FROM deprecated_external_ids WHERE workspace_id = $1 AND external_id = ANY($2::text[])
       UNION SELECT id FROM profiles WHERE workspace_id = $1 AND email = ANY($3::text[])
       UNION SELECT id FROM profiles WHERE workspace_id = $1 AND phone = ANY($4::text[])
     ), paged AS (SELECT id FROM matched ORDER BY id LIMIT $5 OFFSET $6)
     SELECT (SELECT count(*) FROM matched)::int AS total,
            (SELECT json_agg(json_build_object('external_id', p.external_id, 'email', p.email, 'phone', p.phone, 'groups',
                      (SELECT coalesce(json_agg(json_build_object('id', g.id, 'name', g.name, 'channel', g.channel, 'state', s.state) ORDER BY g.name, g.id), '[]')
                         FROM profile_subscriptions s JOIN subscription_groups g ON g.id = s.group_id WHERE s.profile_id = p.id))
                    ORDER BY p.id)
               FROM paged JOIN profiles p ON p.id = paged.id) AS users`,
    [workspaceId, keys.externalIds, keys.emails, keys.phones, page.limit, page.offset],
  )
  return { total: r.rows[0].total, users: r.rows[0].users ?? [] }
}
