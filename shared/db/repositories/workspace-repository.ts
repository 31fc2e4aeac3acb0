import { randomUUID } from 'node:crypto'
import { query, withTransaction, type Pool, type Queryable } from '../pool.js'

export interface RateLimitOverride {
  limit: number
  window_seconds: number
}
export interface RateLimitSettings {
  default_per_hour?: number
  endpoints?: Partial<Record<string, RateLimitOverride>>
}
export interface ExportStorage {
  bucket: string
  region: string
  endpoint?: string
  force_path_style?: boolean
  access_key_id: string
  secret_access_key: string
}
export interface Workspace {
  id: string
  name: string
  global_control_percent: number
  export_storage: ExportStorage | null
  rate_limits: RateLimitSettings
  /** Lets a cache skip loading blocked ids for the usual workspace that blocks none. */
  has_blocked_external_ids: boolean
}

const columns = `id, name, global_control_percent::float8 AS global_control_percent, export_storage, rate_limits,
  EXISTS (SELECT 1 FROM blocked_external_ids b WHERE b.workspace_id = workspaces.id) AS has_blocked_external_ids`

export async function createWorkspace(db: Queryable, name: string): Promise<Workspace | undefined> {
  const r = await query<Workspace>(
    db,
    'createWorkspace',
    `INSERT INTO workspaces (id, name) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING ${columns}`,
    [randomUUID(), name],
  )
  return r.rows[0]
}

export async function getWorkspace(db: Queryable, id: string): Promise<Workspace | undefined> {
  const r = await query<Workspace>(db, 'getWorkspace', `SELECT ${columns} FROM workspaces WHERE id = $1`, [id])
  return r.rows[0]
}

export async function getWorkspaceByName(db: Queryable, name: string): Promise<Workspace | undefined> {
  const r = await query<Workspace>(db, 'getWorkspaceByName', `SELECT ${columns} FROM workspaces WHERE name = $1`, [name])
  return r.rows[0]
}

export async function countWorkspaces(db: Queryable): Promise<number> {
  return (await query<{ n: number }>(db, 'countWorkspaces', 'SELECT count(*)::int AS n FROM workspaces')).rows[0].n
}

export async function setGlobalControlPercent(db: Queryable, id: string, percent: number): Promise<boolean> {
  const r = await query(db, 'setGlobalControlPercent', 'UPDATE workspaces SET global_control_percent = $2 WHERE id = $1', [id, percent])
  return r.rowCount === 1
}

export async function setExportStorage(db: Queryable, id: string, storage: ExportStorage | null): Promise<boolean> {
  const r = await query(db, 'setExportStorage', 'UPDATE workspaces SET export_storage = $2 WHERE id = $1', [id, storage])
  return r.rowCount === 1
}

export async function setRateLimits(db: Queryable, id: string, limits: RateLimitSettings): Promise<boolean> {
  const r = await query(db, 'setRateLimits', 'UPDATE workspaces SET rate_limits = $2 WHERE id = $1', [id, limits])
  return r.rowCount === 1
}

/** Replaces the workspace's blocked external ids with the given list, atomically. */
export async function replaceBlockedExternalIds(pool: Pool, id: string, externalIds: string[]): Promise<void> {
  await withTransaction(pool, async (db) => {
    await query(db, 'clearBlockedExternalIds', 'DELETE FROM blocked_external_ids WHERE workspace_id = $1', [id])
    await query(
      db,
      'insertBlockedExternalIds',
      'INSERT INTO blocked_external_ids (workspace_id, external_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING',
      [id, externalIds],
    )
  })
}

/** Every blocked external id of a workspace (at most the 100,000 one PUT may set): API processes hold them in memory. */
export async function listBlockedExternalIds(db: Queryable, workspaceId: string): Promise<string[]> {
  const r = await query<{ external_id: string }>(
    db,
    'listBlockedExternalIds',
    'SELECT external_id FROM blocked_external_ids WHERE workspace_id = $1',
    [workspaceId],
  )
  return r.rows.map((x) => x.external_id)
}

/** Which of the ids name a workspace of this database. */
export async function existingWorkspaces(db: Queryable, ids: string[]): Promise<Set<string>> {
  const r = await query<{ id: string }>(db, 'existingWorkspaces', 'SELECT id FROM workspaces WHERE id = ANY($1::text[])', [ids])
  return new Set(r.rows.map((row) => row.id))
}
