import { randomUUID } from 'node:crypto'
import { filterAttributeOf, type DashboardUser, type DashboardUserFields, type FilterAttribute, type UserFilter } from '../../domain/scim.js'
import { query, type Queryable } from '../pool.js'

const columns =
  'id, user_name, external_id, given_name, family_name, formatted_name, display_name, active, emails, department, permissions, last_sign_in_at, created_at, updated_at, version'

const fieldValues = (f: DashboardUserFields) => [
  f.externalId, f.givenName, f.familyName, f.formattedName, f.displayName, f.active, JSON.stringify(f.emails), f.department, f.permissions,
]

/** Creates a user; undefined when the userName is taken (compared case-insensitively). */
export async function createDashboardUser(
  db: Queryable,
  input: DashboardUserFields & { userName: string },
): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(
    db,
    'createDashboardUser',
    `INSERT INTO dashboard_users (id, user_name, external_id, given_name, family_name, formatted_name, display_name, active, emails, department, permissions)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT ((lower(user_name))) DO NOTHING
     RETURNING ${columns}`,
    [randomUUID(), input.userName, ...fieldValues(input)],
  )
  return r.rows[0]
}

export async function getDashboardUser(db: Queryable, id: string): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(db, 'getDashboardUser', `SELECT ${columns} FROM dashboard_users WHERE id = $1`, [id])
  return r.rows[0]
}

/** The user, locked until the transaction ends, so a version check and the write that follows it see the same row. */
export async function lockDashboardUser(tx: Queryable, id: string): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(tx, 'lockDashboardUser', `SELECT ${columns} FROM dashboard_users WHERE id = $1 FOR UPDATE`, [id])
  return r.rows[0]
}

/** Replaces every field but the userName and raises the version; undefined when the user does not exist. */
export async function replaceDashboardUser(db: Queryable, id: string, input: DashboardUserFields): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(
    db,
    'replaceDashboardUser',
    `UPDATE dashboard_users
     SET external_id = $2, given_name = $3, family_name = $4, formatted_name = $5, display_name = $6, active = $7,
         emails = $8, department = $9, permissions = $10, updated_at = now(), version = version + 1
     WHERE id = $1
     RETURNING ${columns}`,
    [id, ...fieldValues(input)],
  )
  return r.rows[0]
}

export async function deleteDashboardUser(db: Queryable, id: string): Promise<boolean> {
  const r = await query(db, 'deleteDashboardUser', 'DELETE FROM dashboard_users WHERE id = $1', [id])
  return r.rowCount === 1
}

/** Where each filterable attribute lives: a column, or a key of one `emails` element (alias `e`). */
const filterExpressions: Record<FilterAttribute, string> = {
  id: 'id',
  userName: 'user_name',
  externalId: 'external_id',
  displayName: 'display_name',
  'name.givenName': 'given_name',
  'name.familyName': 'family_name',
  'name.formatted': 'formatted_name',
  department: 'department',
  active: 'active',
  // Answers carry milliseconds; the stored microseconds must not make an echoed value unequal.
  'meta.created': "date_trunc('milliseconds', created_at)",
  'meta.lastModified': "date_trunc('milliseconds', updated_at)",
  'emails.value': "(e->>'value')",
  'emails.type': "(e->>'type')",
  // An address without `primary` is not the primary one (RFC 7643 section 2.4).
  'emails.primary': "coalesce((e->>'primary')::boolean, false)",
}
const SqlOperators = { eq: '=', ne: 'IS DISTINCT FROM', gt: '>', ge: '>=', lt: '<', le: '<=' } as const

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`)
}

const inEmails = (a: FilterAttribute) => a.startsWith('emails.')
const anyEmail = (condition: string) => `EXISTS (SELECT 1 FROM jsonb_array_elements(emails) AS e WHERE ${condition})`

/**
 * One filter node as a SQL condition; every value is bound, never spliced into the text. Each
 * comparison is coalesced to false, so `not` of a comparison with an unassigned attribute is true.
 * Outside a value path, a condition on an emails sub-attribute holds when any address meets it.
 */
function filterCondition(f: UserFilter, values: unknown[], withinEmail = false): string {
  switch (f.op) {
    case 'and':
    case 'or':
      return `(${f.filters.map((x) => filterCondition(x, values, withinEmail)).join(` ${f.op.toUpperCase()} `)})`
    case 'not':
      return `NOT (${filterCondition(f.filter, values, withinEmail)})`
    case 'emails':
      return anyEmail(filterCondition(f.filter, values, true))
  }
  if (inEmails(f.attribute) && !withinEmail) return anyEmail(filterCondition(f, values, true))
  const expr = filterExpressions[f.attribute]
  const { type, caseExact } = filterAttributeOf[f.attribute]
  if (f.op === 'pr') return type === 'string' ? `coalesce(${expr} <> '', false)` : `(${expr} IS NOT NULL)`
  const operand = (value: unknown, cast = '') => {
    values.push(value)
    return type === 'string' && !caseExact ? `lower($${values.length}${cast})` : `$${values.length}${cast}`
  }
  // lower() on both sides for case-insensitive attributes; `lower(user_name) = lower($n)` uses the unique index.
  const subject = type === 'string' && !caseExact ? `lower(${expr})` : expr
  const cast = type === 'dateTime' ? '::timestamptz' : type === 'boolean' ? '::boolean' : '::text'
  switch (f.op) {
    case 'co':
      return `coalesce(${subject} LIKE ${operand(`%${escapeLike(f.value as string)}%`)} ESCAPE '\\', false)`
    case 'sw':
      return `coalesce(${subject} LIKE ${operand(`${escapeLike(f.value as string)}%`)} ESCAPE '\\', false)`
    case 'ew':
      return `coalesce(${subject} LIKE ${operand(`%${escapeLike(f.value as string)}`)} ESCAPE '\\', false)`
    default:
      return `coalesce(${subject} ${SqlOperators[f.op]} ${operand(f.value, cast)}, false)`
  }
}

/** One page of users matching the filter (all users without one), oldest first, and the total count. */
export async function listDashboardUsers(
  db: Queryable,
  opts: { filter?: UserFilter; offset: number; limit: number },
): Promise<{ total: number; users: DashboardUser[] }> {
  const values: unknown[] = []
  const where = opts.filter ? `WHERE ${filterCondition(opts.filter, values)}` : ''
  const total = await query<{ n: number }>(db, 'countDashboardUsers', `SELECT count(*)::int AS n FROM dashboard_users ${where}`, values)
  const page = await query<DashboardUser>(
    db,
    'listDashboardUsers',
    `SELECT ${columns} FROM dashboard_users ${where}
     ORDER BY created_at, id LIMIT $${values.length + 1} OFFSET $${values.length + 2}`,
    [...values, opts.limit, opts.offset],
  )
  return { total: total.rows[0].n, users: page.rows }
}

export const teamKey = (workspaceId: string, name: string) => `${workspaceId}\u0000${name}`

/**
 * The ids of the named teams, creating the teams that do not exist yet. Two statements, so that a
 * team another request created meanwhile is found by the second one.
 */
export async function ensureWorkspaceTeams(
  db: Queryable,
  teams: { workspaceId: string; name: string }[],
): Promise<Map<string, string>> {
  if (teams.length === 0) return new Map()
  const workspaceIds = teams.map((t) => t.workspaceId)
  const names = teams.map((t) => t.name)
  await query(
    db,
    'createWorkspaceTeams',
    `INSERT INTO workspace_teams (id, workspace_id, name)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
     ON CONFLICT (workspace_id, name) DO NOTHING`,
    [teams.map(() => randomUUID()), workspaceIds, names],
  )
  const r = await query<{ id: string; workspace_id: string; name: string }>(
    db,
    'findWorkspaceTeams',
    `SELECT t.id, t.workspace_id, t.name FROM workspace_teams t
     JOIN unnest($1::text[], $2::text[]) AS wanted(workspace_id, name) USING (workspace_id, name)`,
    [workspaceIds, names],
  )
  return new Map(r.rows.map((t) => [teamKey(t.workspace_id, t.name), t.id]))
}
