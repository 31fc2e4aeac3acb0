import { query, type Queryable } from '../pool.js'

export interface PushTokenRow {
  app_id: string
  token: string
  profile_id: number
  device_id: string | null
  owner_anonymous: boolean
}

/** Current owners of the given tokens, locked for the job. */
export async function findPushTokens(db: Queryable, workspaceId: string, tokens: { app_id: string; token: string }[]): Promise<PushTokenRow[]> {
  if (tokens.length === 0) return []
  const r = await query<PushTokenRow>(
    db,
    'findPushTokens',
    `SELECT t.app_id, t.token, t.profile_id, t.device_id, p.push_import_anonymous AS owner_anonymous
       FROM push_tokens t JOIN profiles p ON p.id = t.profile_id
       JOIN unnest($2::text[], $3::text[]) AS w(app_id, token) ON t.app_id = w.app_id AND t.token = w.token
      WHERE t.workspace_id = $1
      FOR UPDATE OF t`,
    [workspaceId, tokens.map((t) => t.app_id), tokens.map((t) => t.token)],
  )
  return r.rows
}

/** Attaches tokens to profiles; a token that belonged to another profile moves. */
export async function upsertPushTokens(
  db: Queryable,
  workspaceId: string,
  rows: { app_id: string; token: string; profile_id: number; device_id: string | null }[],
): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'upsertPushTokens',
    `INSERT INTO push_tokens (workspace_id, app_id, token, profile_id, device_id)
     SELECT $1, r.app_id, r.token, r.profile_id, r.device_id
       FROM json_to_recordset($2::json) AS r(app_id text, token text, profile_id bigint, device_id text)
     ON CONFLICT (workspace_id, app_id, token) DO UPDATE SET profile_id = excluded.profile_id,
       device_id = COALESCE(excluded.device_id, push_tokens.device_id)`,
    [workspaceId, JSON.stringify(rows)],
  )
}

/** Temporary anonymous profiles from a push-token import that no longer hold any token. */
export async function emptyAnonymousProfiles(db: Queryable, profileIds: number[]): Promise<number[]> {
  if (profileIds.length === 0) return []
  const r = await query<{ id: number }>(
    db,
    'emptyAnonymousProfiles',
    `SELECT p.id FROM profiles p WHERE p.id = ANY($1::bigint[]) AND p.push_import_anonymous
       AND NOT EXISTS (SELECT 1 FROM push_tokens t WHERE t.profile_id = p.id)`,
    [profileIds],
  )
  return r.rows.map((x) => x.id)
}
