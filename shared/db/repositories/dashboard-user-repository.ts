import { randomUUID } from 'node:crypto'
import type { DashboardUser, DashboardUserFields, FilterAttribute, UserFilter } from '../../domain/scim.js'
import { query, type Queryable } from '../pool.js'

const columns = 'id, user_name, given_name, family_name, department, permissions, last_sign_in_at, created_at, updated_at'

/** Creates a user; undefined when the userName is taken (compared case-insensitively). */
export async function createDashboardUser(
  db: Queryable,
  input: DashboardUserFields & { userName: string },
): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(
    db,
    'createDashboardUser',
    `INSERT INTO dashboard_users (id, user_name, given_name, family_name, department, permissions)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT ((lower(user_name))) DO NOTHING
     RETURNING ${columns}`,
    [randomUUID(), input.userName, input.givenName, input.familyName, input.department, input.permissions],
  )
  return r.rows[0]
}

export async function getDashboardUser(db: Queryable, id: string): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(db, 'getDashboardUser', `SELECT ${columns} FROM dashboard_users WHERE id = $1`, [id])
  return r.rows[0]
}

/** Replaces every field but the userName; undefined when the user does not exist. */
export async function replaceDashboardUser(db: Queryable, id: string, input: DashboardUserFields): Promise<DashboardUser | undefined> {
  const r = await query<DashboardUser>(
    db,
    'replaceDashboardUser',
    `UPDATE dashboard_users
     SET given_name = $2, family_name = $3, department = $4, permissions = $5, updated_at = now()
     WHERE id = $1
     RETURNING ${columns}`,
    [id, input.givenName, input.familyName, input.department, input.permissions],
  )
  return r.rows[0]
}

export async function deleteDashboardUser(db: Queryable, id: string): Promise<boolean> {
  const r = await query(db, 'deleteDashboardUser', 'DELETE FROM dashboard_users WHERE id = $1', [id])
  return r.rowCount === 1
}

const filterColumns: Record<FilterAttribute, { column: string; caseExact: boolean }> = {
  id: { column: 'id', caseExact: true },
  userName: { column: 'user_name', caseExact: false },
  'name.givenName': { column: 'given_name', caseExact: false },
  'name.familyName': { column: 'family_name', caseExact: false },
  department: { column: 'department', caseExact: false },
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`)
}

/** One filter node as a SQL condition; every value is bound, never spliced into the text. */
function filterCondition(f: UserFilter, values: unknown[]): string {
  switch (f.op) {
    case 'and':
    case 'or':
      return `(${f.filters.map((x) => filterCondition(x, values)).join(` ${f.op.toUpperCase()} `)})`
    case 'not':
      return `NOT (${filterCondition(f.filter, values)})`
    case 'pr':
      return `${filterColumns[f.attribute].column} IS NOT NULL`
  }
  const { column, caseExact } = filterColumns[f.attribute]
  // lower() on both sides for case-insensitive attributes; `lower(user_name) = lower($n)` uses the unique index.
  const operand = (value: string) => {
    values.push(value)
    return caseExact ? `$${values.length}` : `lower($${values.length})`
  }
  const subject = caseExact ? column : `lower(${column})`
  switch (f.op) {
    case 'eq':
      return `${subject} = ${operand(f.value)}`
    case 'ne':
      return `${subject} <> ${operand(f.value)}`
    case 'co':
      return `${subject} LIKE ${operand(`%${escapeLike(f.value)}%`)} ESCAPE '\\'`
    case 'sw':
      return `${subject} LIKE ${operand(`${escapeLike(f.value)}%`)} ESCAPE '\\'`
    case 'ew':
      return `${subject} LIKE ${operand(`%${escapeLike(f.value)}`)} ESCAPE '\\'`
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
