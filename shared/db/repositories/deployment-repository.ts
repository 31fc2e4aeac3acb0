import { randomUUID } from 'node:crypto'
import { query, type Queryable } from '../pool.js'

/** Where a deployment's event history lives; null until a process first opens it. */
export type HistoryKind = 'embedded' | 'server'

const selectRow = 'SELECT id::text AS id, history, engine_at FROM deployment'

export interface DeploymentRow {
  id: string
  history: HistoryKind | null
  /** The embedded engine's place (`host:directory`), once claimed. */
  engine_at: string | null
}

/**
 * The deployment this database belongs to, created by the first process to ask. Not made by the
 * migration: a database copied from another (a template) must not inherit its identity.
 */
export async function ensureDeployment(db: Queryable): Promise<DeploymentRow> {
  await query(db, 'createDeployment', 'INSERT INTO deployment (id) VALUES ($1) ON CONFLICT DO NOTHING', [randomUUID()])
  return (await query<DeploymentRow>(db, 'getDeployment', selectRow)).rows[0]
}

/**
 * Records where the history lives, once: on a server, or in the embedded engine at `engineAt`
 * (which a reservation may have named already). Answers the row as it stands after, another
 * process's claim if it was first.
 */
export async function claimHistory(db: Queryable, kind: HistoryKind, engineAt?: string): Promise<DeploymentRow> {
  await query(db, 'claimHistory', 'UPDATE deployment SET history = $1, engine_at = $2 WHERE history IS NULL AND (engine_at IS NULL OR engine_at = $2)', [kind, engineAt ?? null])
  return (await query<DeploymentRow>(db, 'getDeployment', selectRow)).rows[0]
}

/**
 * Reserves the embedded engine's place for a process about to create it, so that of two hosts
 * starting together on a new deployment only one makes an engine. Answers the row after.
 */
export async function reserveEnginePlace(db: Queryable, engineAt: string): Promise<DeploymentRow> {
  await query(db, 'reserveEnginePlace', 'UPDATE deployment SET engine_at = $1 WHERE history IS NULL AND engine_at IS NULL', [engineAt])
  return (await query<DeploymentRow>(db, 'getDeployment', selectRow)).rows[0]
}

/** Whether the database holds any profile: a deployment with profiles but no recorded history is an old one, whose history exists somewhere. */
export async function holdsProfiles(db: Queryable): Promise<boolean> {
  return (await query<{ any: boolean }>(db, 'holdsProfiles', 'SELECT EXISTS (SELECT 1 FROM profiles) AS any')).rows[0].any
}
