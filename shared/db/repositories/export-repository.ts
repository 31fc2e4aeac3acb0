import { query, withTransaction, type Pool, type Queryable } from '../pool.js'

export interface ExportFile {
  name: string
  users: number
  bytes: number
  key?: string
}

export interface ExportStatus {
  id: string
  kind: 'segment' | 'global_control_group'
  segment_id?: string
  status: 'queued' | 'running' | 'done' | 'failed'
  users_exported: number
  files: ExportFile[]
  started_at: string
  finished_at?: string
  error?: string
}

/** The operator API's view of one export. */
export async function getExport(db: Queryable, workspaceId: string, id: string): Promise<ExportStatus | undefined> {
  const r = await query<{
    id: string
    kind: ExportStatus['kind']
    segment_id: string | null
    status: ExportStatus['status']
    users_exported: number
    files: ExportFile[]
    started_at: Date
    finished_at: Date | null
    error: string | null
  }>(
    db,
    'getExport',
    `SELECT id, kind, segment_id, status, users_exported, files, started_at, finished_at, error
       FROM exports WHERE workspace_id = $1 AND id = $2`,
    [workspaceId, id],
  )
  const e = r.rows[0]
  if (!e) return undefined
  return {
    id: e.id,
    kind: e.kind,
    ...(e.segment_id ? { segment_id: e.segment_id } : {}),
    status: e.status,
    users_exported: e.users_exported,
    files: e.files,
    started_at: e.started_at.toISOString(),
    ...(e.finished_at ? { finished_at: e.finished_at.toISOString() } : {}),
    ...(e.error ? { error: e.error } : {}),
  }
}

/** What an export request asked for, kept in the row so the worker needs nothing else. */
export interface ExportRequest {
  fields_to_export: string[]
  custom_attributes_to_export?: string[]
  output_format: 'zip' | 'gzip'
  callback_endpoint?: string
  /** Decided when the request is accepted: the workspace's S3 bucket, or the service's own store. */
  destination: 's3' | 'local'
}

export interface ExportRun {
  id: string
  workspace_id: string
  kind: ExportStatus['kind']
  segment_id: string | null
  status: ExportStatus['status']
  request: ExportRequest
  object_prefix: string
  url: string | null
  started_at: Date
}

export type CreateExportResult = { created: true } | { created: false; reason: 'segment_busy' | 'workspace_busy' }

/**
 * Inserts a queued export unless its segment already has one queued or running (the partial
 * unique index decides) or the workspace already has `maxActive` of them. The workspace lock
 * makes the count and the insert one step, so two racing requests cannot both take the last slot.
 */
export async function createExport(
  pool: Pool,
  input: { id: string; workspaceId: string; kind: ExportStatus['kind']; segmentId?: string; request: ExportRequest; objectPrefix: string; url?: string; maxActive: number },
): Promise<CreateExportResult> {
  return withTransaction(pool, async (db) => {
    await query(db, 'lockWorkspaceExports', `SELECT pg_advisory_xact_lock(hashtext('exports:' || $1))`, [input.workspaceId])
    const active = await query<{ n: number }>(
      db,
      'countActiveExports',
      `SELECT count(*)::int AS n FROM exports WHERE workspace_id = $1 AND status IN ('queued', 'running')`,
      [input.workspaceId],
    )
    if (active.rows[0].n >= input.maxActive) return { created: false, reason: 'workspace_busy' }
    const r = await query(
      db,
      'createExport',
      `INSERT INTO exports (id, workspace_id, kind, segment_id, status, request, object_prefix, url)
       VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7)
       ON CONFLICT (workspace_id, segment_id) WHERE status IN ('queued', 'running') AND segment_id IS NOT NULL DO NOTHING`,
      [input.id, input.workspaceId, input.kind, input.segmentId ?? null, input.request, input.objectPrefix, input.url ?? null],
    )
    return r.rowCount === 1 ? { created: true } : { created: false, reason: 'segment_busy' }
  })
}

export async function loadExportRun(db: Queryable, id: string): Promise<ExportRun | undefined> {
  const r = await query<ExportRun>(
    db,
    'loadExportRun',
    `SELECT id, workspace_id, kind, segment_id, status, request, object_prefix, url, started_at FROM exports WHERE id = $1`,
    [id],
  )
  return r.rows[0]
}

/** (Re)starts a run from nothing: a retried job writes every file again under the same names. */
export async function startExportRun(db: Queryable, id: string): Promise<boolean> {
  const r = await query(
    db,
    'startExportRun',
    `UPDATE exports SET status = 'running', users_exported = 0, files = '[]', error = NULL
      WHERE id = $1 AND status IN ('queued', 'running')`,
    [id],
  )
  return r.rowCount === 1
}

export async function recordExportFile(db: Queryable, id: string, file: ExportFile): Promise<void> {
  await query(
    db,
    'recordExportFile',
    `UPDATE exports SET users_exported = users_exported + $2, files = files || $3::jsonb WHERE id = $1`,
    [id, file.users, JSON.stringify([file])],
  )
}

export async function finishExport(db: Queryable, id: string): Promise<void> {
  await query(db, 'finishExport', `UPDATE exports SET status = 'done', finished_at = now() WHERE id = $1 AND status = 'running'`, [id])
}

/** A clear failure state: the reason is shown by the operator API, and the segment is free again. */
export async function failExport(db: Queryable, id: string, reason: string): Promise<void> {
  await query(
    db,
    'failExport',
    `UPDATE exports SET status = 'failed', error = $2, finished_at = now() WHERE id = $1 AND status IN ('queued', 'running')`,
    [id, reason],
  )
}

/** What the download link needs: where the files are and whether they are ready. */
export async function getExportDownload(
  db: Queryable,
  id: string,
): Promise<{ status: ExportStatus['status']; object_prefix: string; files: ExportFile[]; finished_at: Date | null; error: string | null } | undefined> {
  const r = await query<{ status: ExportStatus['status']; object_prefix: string; files: ExportFile[]; finished_at: Date | null; error: string | null }>(
    db,
    'getExportDownload',
    `SELECT status, object_prefix, files, finished_at, error FROM exports WHERE id = $1`,
    [id],
  )
  return r.rows[0]
}

/**
 * Finished exports kept in the service's own store (they have a download URL) whose link expired
 * before `expiredBefore` and whose files are still on disk.
 */
export async function listExpiredLocalExports(db: Queryable, expiredBefore: Date, limit: number): Promise<{ id: string; object_prefix: string }[]> {
  const r = await query<{ id: string; object_prefix: string }>(
    db,
    'listExpiredLocalExports',
    `SELECT id, object_prefix FROM exports
      WHERE url IS NOT NULL AND files_purged_at IS NULL AND status IN ('done', 'failed') AND finished_at < $1
      ORDER BY finished_at LIMIT $2`,
    [expiredBefore, limit],
  )
  return r.rows
}

export async function markExportFilesPurged(db: Queryable, id: string): Promise<void> {
  await query(db, 'markExportFilesPurged', `UPDATE exports SET files_purged_at = now() WHERE id = $1`, [id])
}
