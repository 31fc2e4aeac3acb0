import { query, type Queryable } from '../pool.js'
import type { MergePair } from './identity-repository.js'

/** A deprecated external id (/users/external_ids/rename) and the profile it still names. */
export interface DeprecatedExternalId {
  external_id: string
  profile_id: number
}

/**
 * The profiles deprecated external ids name, with each profile's service id (to read or lock it
 * like any other). The track path asks only for ids no profile holds as its primary id, so known
 * users never cost this read.
 */
export async function findDeprecatedExternalIds(
  db: Queryable,
  workspaceId: string,
  externalIds: readonly string[],
): Promise<(DeprecatedExternalId & { service_id: string })[]> {
  if (externalIds.length === 0) return []
  const r = await query<DeprecatedExternalId & { service_id: string }>(
    db,
    'findDeprecatedExternalIds',
    `SELECT d.external_id, d.profile_id, p.service_id
       FROM deprecated_external_ids d JOIN profiles p ON p.id = d.profile_id
      WHERE d.workspace_id = $1 AND d.external_id = ANY($2::text[])`,
    [workspaceId, externalIds],
  )
  return r.rows
}

/** Records external ids a rename replaced: each keeps naming its profile. */
export async function insertDeprecatedExternalIds(db: Queryable, workspaceId: string, rows: DeprecatedExternalId[]): Promise<void> {
  if (rows.length === 0) return
  await query(
    db,
    'insertDeprecatedExternalIds',
    `INSERT INTO deprecated_external_ids (workspace_id, external_id, profile_id)
     SELECT $1, r.external_id, r.profile_id FROM unnest($2::text[], $3::bigint[]) AS r(external_id, profile_id)`,
    [workspaceId, rows.map((r) => r.external_id), rows.map((r) => r.profile_id)],
  )
}

/** Forgets deprecated external ids (/users/external_ids/remove). */
export async function deleteDeprecatedExternalIds(db: Queryable, workspaceId: string, externalIds: string[]): Promise<void> {
  if (externalIds.length === 0) return
  await query(
    db,
    'deleteDeprecatedExternalIds',
    'DELETE FROM deprecated_external_ids WHERE workspace_id = $1 AND external_id = ANY($2::text[])',
    [workspaceId, externalIds],
  )
}

/** A merge hands the merged profile's deprecated external ids to the kept one, as it does its aliases. */
export async function moveDeprecatedExternalIds(db: Queryable, pairs: MergePair[]): Promise<void> {
  if (pairs.length === 0) return
  await query(
    db,
    'moveDeprecatedExternalIds',
    `UPDATE deprecated_external_ids d SET profile_id = m.to_id
       FROM unnest($1::bigint[], $2::bigint[]) AS m(from_id, to_id) WHERE d.profile_id = m.from_id`,
    [pairs.map((p) => p.from), pairs.map((p) => p.to)],
  )
}
