import { ProfileFields, type ProfileFieldName, type ProfileFieldValues } from '../../domain/profile-fields.js'
import { isoText, query, type Queryable } from '../pool.js'

/** A profile row as the workers read and write it: its keys, its fields (shared/domain/profile-fields.ts), the rest. */
export interface ProfileRow extends ProfileFieldValues {
  id: number
  workspace_id: string
  service_id: string
  external_id: string | null
  custom_attributes: Record<string, unknown>
  random_bucket: number
  push_import_anonymous: boolean
  created_at: string
  updated_at: string
  version: number
}

type Column = readonly [name: keyof ProfileRow, type: 'bigint' | 'int' | 'text' | 'jsonb' | 'boolean' | 'timestamptz']

const FIELD_COLUMNS: readonly Column[] = ProfileFields.map((f) => [f.name, f.sql])

/** The columns saveProfiles writes, with their types as json_to_recordset reads them. */
const WRITE_FIELDS: readonly Column[] = [
  ['id', 'bigint'], ['workspace_id', 'text'], ['service_id', 'text'], ['external_id', 'text'],
  ...FIELD_COLUMNS,
  ['custom_attributes', 'jsonb'], ['random_bucket', 'int'], ['push_import_anonymous', 'boolean'], ['created_at', 'timestamptz'],
]
const WRITE_COLUMNS = WRITE_FIELDS.map(([name, type]) => `${name} ${type}`).join(', ')

/** What a rewrite of a stored profile sets: all but its id, workspace, service id, random bucket and creation time, which never change. */
const UPDATED: readonly Column[] = [['external_id', 'text'], ...FIELD_COLUMNS, ['custom_attributes', 'jsonb'], ['push_import_anonymous', 'boolean']]

/** A column as a row holds it: times as ISO 8601 UTC text with milliseconds, as JavaScript writes them. */
const selected = ([name, type]: Column) =>
  type === 'timestamptz' ? `${isoText(`p.${name}`)} AS ${name}` : `p.${name}`

/** A written column's value: a false boolean is left out of the JSON (profileRowsJson) and reads back as null. */
const written = ([name, type]: Column) => (type === 'boolean' ? `coalesce(r.${name}, false)` : `r.${name}`)

const READ_FIELDS: readonly Column[] = [...WRITE_FIELDS, ['updated_at', 'timestamptz'], ['version', 'int']]
export const SELECT_PROFILE = `SELECT ${READ_FIELDS.map(selected).join(', ')}`

/**
 * The given columns of a row, copied in their order into a new object: every copy of the same
 * columns gets the same shape. A rest pattern would copy the row's other columns too.
 */
function copyColumns<T>(row: ProfileRow, columns: readonly Column[]): T {
  const copy: Record<string, unknown> = {}
  for (const [name] of columns) copy[name] = row[name]
  return copy as T
}

/** The profile of a row that selected SELECT_PROFILE beside other columns. */
export const profileOfRow = (row: ProfileRow): ProfileRow => copyColumns(row, READ_FIELDS)

const INSERT_PROFILES = `INSERT INTO profiles (${WRITE_FIELDS.map(([name]) => name).join(', ')}, updated_at, version)
       SELECT ${WRITE_FIELDS.map(written).join(', ')}, now(), 1
         FROM json_to_recordset($1::json) AS r(${WRITE_COLUMNS})`

/** A column a rewrite of a stored profile may set (UPDATED). */
export type UpdatedColumn = 'external_id' | ProfileFieldName | 'custom_attributes' | 'push_import_anonymous'
/** Every column a rewrite may set, in the order its statements set them. */
export const UPDATED_COLUMNS: readonly UpdatedColumn[] = UPDATED.map(([name]) => name as UpdatedColumn)
const WRITE_NAMES = WRITE_FIELDS.map(([name]) => name)

/**
 * The rewrite of the given columns of stored profiles, one statement text per set of columns:
 * a batch that changes a few fields of each profile sends and parses only those (half the
 * statement's time against the whole row, for the 7 columns of a 13-field attributes object).
 */
const updateStatements = new Map<string, string>()
function updateStatement(columns: readonly UpdatedColumn[]): string {
  const key = columns.join(',')
  let text = updateStatements.get(key)
  if (text === undefined) {
    const set = UPDATED.filter(([name]) => columns.includes(name as UpdatedColumn))
    text = `UPDATE profiles p SET ${set.map((c) => `${c[0]} = ${written(c)}, `).join('')}updated_at = now(), version = p.version + 1
       FROM json_to_recordset($1::json) AS r(${[['id', 'bigint'] as const, ...set].map(([name, type]) => `${name} ${type}`).join(', ')})
       WHERE p.id = r.id`
    updateStatements.set(key, text)
  }
  return text
}

export interface ProfileLookup {
  externalIds?: string[]
  aliases?: { alias_label: string; alias_name: string }[]
  serviceIds?: string[]
  emails?: string[]
  phones?: string[]
}

export interface LockedProfiles {
  byId: Map<number, ProfileRow>
  aliasOwner: Map<string, number>
  /** Deprecated external id -> the profile it still names (/users/external_ids/rename), where read. */
  deprecatedOwner?: Map<string, number>
}

export const aliasKey = (label: string, name: string) => `${label}\u001f${name}`

/**
 * The profiles a lookup names ($1 workspace, $2..$7 the lookup's arrays, see `lookupParams`), as
 * a condition on `profiles p`: one index per kind of identifier, the aliases' owners read first
 * as an id list, all of it one bitmap scan of the table (half the time and buffers of a union of
 * look-ups joined back to the table by id, for a batch naming 2,000 users).
 */
const NAMED_PROFILES = `p.workspace_id = $1 AND (
         p.external_id = ANY($2::text[]) OR p.service_id = ANY($3::text[]) OR p.email = ANY($4::text[]) OR p.phone = ANY($5::text[])
         OR p.id = ANY(ARRAY(SELECT a.profile_id FROM profile_aliases a
                               JOIN unnest($6::text[], $7::text[]) AS w(label, name) ON a.alias_label = w.label AND a.alias_name = w.name
                              WHERE a.workspace_id = $1)))`

export function lookupParams(workspaceId: string, lookup: ProfileLookup): unknown[] {
  const aliases = lookup.aliases ?? []
  return [
    workspaceId,
    lookup.externalIds ?? [],
    lookup.serviceIds ?? [],
    lookup.emails ?? [],
    lookup.phones ?? [],
    aliases.map((a) => a.alias_label),
    aliases.map((a) => a.alias_name),
  ]
}

/** The owner of each alias the lookup names ($6, $7 of `lookupParams`). */
async function aliasOwners(db: Queryable, params: unknown[]): Promise<Map<string, number>> {
  const owners = new Map<string, number>()
  if ((params[5] as string[]).length === 0) return owners
  const a = await query<{ alias_label: string; alias_name: string; profile_id: number }>(
    db,
    'findAliasOwners',
    `SELECT a.alias_label, a.alias_name, a.profile_id FROM profile_aliases a
       JOIN unnest($2::text[], $3::text[]) AS w(label, name) ON a.alias_label = w.label AND a.alias_name = w.name
      WHERE a.workspace_id = $1`,
    [params[0], params[5], params[6]],
  )
  for (const row of a.rows) owners.set(aliasKey(row.alias_label, row.alias_name), row.profile_id)
  return owners
}

/**
 * Loads and row-locks (in id order, so concurrent jobs never deadlock) every profile the
 * identifiers name, plus the owner of each alias.
 */
export async function lockProfiles(db: Queryable, workspaceId: string, lookup: ProfileLookup, lock = true): Promise<LockedProfiles> {
  const params = lookupParams(workspaceId, lookup)
  const r = await query<ProfileRow>(
    db,
    'lockProfiles',
    `${SELECT_PROFILE} FROM profiles p WHERE ${NAMED_PROFILES} ORDER BY p.id ${lock ? 'FOR UPDATE' : ''}`,
    params,
  )
  return { byId: new Map(r.rows.map((p) => [p.id, p])), aliasOwner: await aliasOwners(db, params) }
}

/** What finds a profile and orders it among others: its keys, recency and version, without its fields. */
export type ProfileKeys = Pick<ProfileRow, 'id' | 'external_id' | 'service_id' | 'email' | 'phone' | 'updated_at' | 'version'>

const KEY_FIELDS: readonly Column[] = [
  ['id', 'bigint'], ['external_id', 'text'], ['service_id', 'text'], ['email', 'text'], ['phone', 'text'], ['updated_at', 'timestamptz'], ['version', 'int'],
]

/** A profile's keys, copied out of its row (a new object: callers stamp recency on keys, never on rows). */
export const keysOfRow = (row: ProfileRow): ProfileKeys => copyColumns(row, KEY_FIELDS)

/** The advisory lock class of workspaces' user identities (the two-key form: apart from the sweep's one-key lock). */
const IDENTITIES_LOCK = 22

/**
 * Holds who the users of some workspaces are still until the transaction ends. A track batch
 * holds it `shared` (batches of every partition side by side) from its first statement, so
 * identifiers it resolved keep naming the same profiles until it commits; what changes who a user
 * is (a merge, an identify, a delete) holds it `exclusive`, so it waits for the batches running
 * and holds new ones back until it commits. It replaces a key-share lock on every profile a batch
 * names, which Postgres writes into the row (a WAL record, and a page dirtied, per profile: a
 * third of Postgres' time under a mixed load). Workspaces are locked in key order, so two
 * holders of several never deadlock; either kind of holder takes its row locks after it.
 */
export async function lockWorkspaceIdentities(db: Queryable, workspaceIds: string[], mode: 'shared' | 'exclusive'): Promise<void> {
  if (workspaceIds.length === 0) return
  const lock = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock'
  await query(
    db,
    mode === 'shared' ? 'lockWorkspaceIdentitiesShared' : 'lockWorkspaceIdentities',
    `SELECT count(${lock}(${IDENTITIES_LOCK}, k)) FROM (SELECT DISTINCT hashtext(w) AS k FROM unnest($1::text[]) AS w ORDER BY k) AS keys`,
    [workspaceIds],
  )
}

/**
 * The keys of every profile the identifiers name, plus the owner of each alias, read under the
 * workspace's identities lock (`lockWorkspaceIdentities`): a batch reads the fields of the few it
 * will change afterwards (`lockProfilesToChange`, `loadRecordParts`); most of a mixed load's
 * profiles only get events, whose rows the batch never reads or writes, nor locks. Another
 * partition's batch may change the same user's fields meanwhile (a user named by email in one
 * request and by phone in the next); neither waits for the other. An alias another batch is
 * adding shows once it commits (a batch creating it again meets its unique index and retries),
 * and `loadRecordParts` reads it with the profile's parts.
 */
export async function readProfileKeys(db: Queryable, workspaceId: string, lookup: ProfileLookup): Promise<{ keys: ProfileKeys[]; aliasOwner: Map<string, number> }> {
  const params = lookupParams(workspaceId, lookup)
  const r = await query<ProfileKeys>(db, 'readProfileKeys', `SELECT ${KEY_FIELDS.map(selected).join(', ')} FROM profiles p WHERE ${NAMED_PROFILES}`, params)
  return { keys: r.rows, aliasOwner: await aliasOwners(db, params) }
}

/**
 * Locks (in id order) the profiles a batch will change, named by `readProfileKeys`, against every
 * other writer; answers their rows as the last writer left them (another partition's batch may
 * have changed them since the keys were read). Two batches wait for each other here in id order
 * or not at all.
 */
export async function lockProfilesToChange(db: Queryable, ids: number[]): Promise<ProfileRow[]> {
  if (ids.length === 0) return []
  const r = await query<ProfileRow>(db, 'lockProfilesToChange', `${SELECT_PROFILE} FROM profiles p WHERE p.id = ANY($1::bigint[]) ORDER BY p.id FOR NO KEY UPDATE`, [ids])
  return r.rows
}

export async function loadProfiles(db: Queryable, ids: number[]): Promise<ProfileRow[]> {
  const r = await query<ProfileRow>(db, 'loadProfiles', `${SELECT_PROFILE} FROM profiles p WHERE p.id = ANY($1::bigint[]) ORDER BY p.id`, [ids])
  return r.rows
}

/** Reserves ids for profiles a job may create, in one round trip. */
export async function allocateProfileIds(db: Queryable, count: number): Promise<number[]> {
  if (count === 0) return []
  const r = await query<{ id: number }>(db, 'allocateProfileIds', `SELECT nextval('profiles_id_seq') AS id FROM generate_series(1, $1)`, [count])
  return r.rows.map((x) => x.id)
}

/**
 * Rows as json_to_recordset reads them, null and false fields left out (read back as null; the
 * statements coalesce push_import_anonymous): most profile fields are empty, and a third of the
 * bytes is less for Postgres to parse.
 */
function profileRowsJson(rows: ProfileRow[], columns: readonly (keyof ProfileRow)[] = WRITE_NAMES): string {
  return JSON.stringify(
    rows.map((row) => {
      const set: Record<string, unknown> = {}
      for (const name of columns) {
        const value = row[name]
        if (value !== null && value !== false) set[name] = value
      }
      return set
    }),
  )
}

/** Inserts new profiles and rewrites changed ones (every column they may change), bumping version and updated_at. */
export async function saveProfiles(db: Queryable, created: ProfileRow[], changed: ProfileRow[]): Promise<void> {
  await insertProfiles(db, created)
  await updateProfiles(db, changed, UPDATED_COLUMNS)
}

export async function insertProfiles(db: Queryable, rows: ProfileRow[]): Promise<void> {
  if (rows.length === 0) return
  await query(db, 'insertProfiles', INSERT_PROFILES, [profileRowsJson(rows)])
}

/** Rewrites `columns` of stored profiles (none: only a new version), bumping version and updated_at. */
export async function updateProfiles(db: Queryable, rows: ProfileRow[], columns: readonly UpdatedColumn[]): Promise<void> {
  if (rows.length === 0) return
  await query(db, 'updateProfiles', updateStatement(columns), [profileRowsJson(rows, ['id', ...columns])])
}

/** Marks profiles changed by a side effect (a subscription, a token) so snapshots pick them up. */
export async function touchProfiles(db: Queryable, ids: number[]): Promise<void> {
  if (ids.length === 0) return
  await query(db, 'touchProfiles', 'UPDATE profiles SET updated_at = now(), version = version + 1 WHERE id = ANY($1::bigint[])', [ids])
}

export async function insertAliases(db: Queryable, workspaceId: string, rows: { alias_label: string; alias_name: string; profile_id: number }[]): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'insertAliases',
    `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id)
     SELECT $1, r.alias_label, r.alias_name, r.profile_id FROM json_to_recordset($2::json) AS r(alias_label text, alias_name text, profile_id bigint)
     ON CONFLICT DO NOTHING`,
    [workspaceId, JSON.stringify(rows)],
  )
}

/** Profile ids (other than those given) that share one of the emails. */
export async function profilesWithEmails(db: Queryable, workspaceId: string, emails: string[]): Promise<{ id: number; email: string }[]> {
  if (emails.length === 0) return []
  const r = await query<{ id: number; email: string }>(
    db,
    'profilesWithEmails',
    'SELECT id, email FROM profiles WHERE workspace_id = $1 AND email = ANY($2::text[]) ORDER BY id FOR UPDATE',
    [workspaceId, emails],
  )
  return r.rows
}

/** Deletes profiles (aliases, tokens and states go by cascade); returns the version each tombstone must carry. */
export async function deleteProfiles(db: Queryable, ids: number[]): Promise<{ id: number; version: number }[]> {
  if (ids.length === 0) return []
  const r = await query<{ id: number; version: number }>(
    db,
    'deleteProfiles',
    'DELETE FROM profiles WHERE id = ANY($1::bigint[]) RETURNING id, version + 1 AS version',
    [ids],
  )
  return r.rows
}

/** Sets the email subscription state of profiles (those sharing an address with an updated user). */
export async function setEmailSubscribe(db: Queryable, ids: number[], state: string): Promise<void> {
  if (ids.length === 0) return
  await query(
    db,
    'setEmailSubscribe',
    'UPDATE profiles SET email_subscribe = $2, updated_at = now(), version = version + 1 WHERE id = ANY($1::bigint[])',
    [ids, state],
  )
}
