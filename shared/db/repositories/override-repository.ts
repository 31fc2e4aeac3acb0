import type pg from 'pg'
import { query, type Pool, type Queryable } from '../pool.js'

/**
 * A merge override: the ClickHouse rows of `oldProfileId` (a merged profile, gone) read as
 * `newProfileId` until the sweep rewrites them. `deleted` marks an override that ended.
 */
export interface Override {
  workspaceId: string
  oldProfileId: number
  newProfileId: number
  version: number
  deleted: boolean
}

/** Profiles whose history the sweep must erase, by workspace. */
export interface Erasures {
  workspaceId: string
  profileIds: number[]
}

interface OverrideRow {
  workspace_id: string
  old_profile_id: number
  new_profile_id: number
  version: number
}

const RETURNING = 'RETURNING workspace_id, old_profile_id, new_profile_id, version'
const toOverride = (deleted: boolean) => (r: OverrideRow): Override => ({
  workspaceId: r.workspace_id,
  oldProfileId: r.old_profile_id,
  newProfileId: r.new_profile_id,
  version: r.version,
  deleted,
})

/** Records merges (each `from` already at the end of its chain `to`); returns the rows written. */
export async function insertOverrides(db: Queryable, workspaceId: string, merges: { from: number; to: number }[]): Promise<Override[]> {
  if (merges.length === 0) return []
  const r = await query<OverrideRow>(
    db,
    'insertOverrides',
    `INSERT INTO profile_overrides (old_profile_id, workspace_id, new_profile_id)
     SELECT m.from_id, $1, m.to_id FROM unnest($2::bigint[], $3::bigint[]) AS m(from_id, to_id) ${RETURNING}`,
    [workspaceId, merges.map((m) => m.from), merges.map((m) => m.to)],
  )
  return r.rows.map(toOverride(false))
}

/**
 * Points the overrides that led to a profile merged since at the end of its chain (when B is
 * merged into C, A -> B becomes A -> C); returns the rows written, each with a new version.
 */
export async function repointOverrides(db: Queryable, merges: { from: number; to: number }[]): Promise<Override[]> {
  if (merges.length === 0) return []
  const r = await query<OverrideRow>(
    db,
    'repointOverrides',
    `UPDATE profile_overrides o
        SET new_profile_id = m.to_id, version = nextval('profile_override_version'), recorded_at = clock_timestamp()
       FROM unnest($1::bigint[], $2::bigint[]) AS m(from_id, to_id)
      WHERE o.new_profile_id = m.from_id ${RETURNING}`,
    [merges.map((m) => m.from), merges.map((m) => m.to)],
  )
  return r.rows.map(toOverride(false))
}

/** The merges into these profiles the sweep has not yet squashed (by the index on `new_profile_id`). */
export async function overridesInto(db: Queryable, profileIds: number[]): Promise<Override[]> {
  if (profileIds.length === 0) return []
  const r = await query<OverrideRow>(
    db,
    'overridesInto',
    'SELECT workspace_id, old_profile_id, new_profile_id, version FROM profile_overrides WHERE new_profile_id = ANY($1::bigint[])',
    [profileIds],
  )
  return r.rows.map(toOverride(false))
}

/** Ends the overrides leading to deleted profiles; returns them (their old profiles' rows are erased too). */
export async function dropOverridesInto(db: Queryable, profileIds: number[]): Promise<Override[]> {
  if (profileIds.length === 0) return []
  const r = await query<OverrideRow>(db, 'dropOverridesInto', `DELETE FROM profile_overrides WHERE new_profile_id = ANY($1::bigint[]) ${RETURNING}`, [
    profileIds,
  ])
  return r.rows.map(toOverride(true))
}

/** Queues deleted profiles for physical erasure of their ClickHouse rows. */
export async function recordErasures(db: Queryable, erasures: Erasures[]): Promise<void> {
  const rows = erasures.flatMap((e) => e.profileIds.map((id) => ({ workspace_id: e.workspaceId, profile_id: id })))
  if (rows.length === 0) return
  await query(
    db,
    'recordErasures',
    `INSERT INTO pending_erasures (profile_id, workspace_id)
     SELECT r.profile_id, r.workspace_id FROM json_to_recordset($1::json) AS r(profile_id bigint, workspace_id text)
     ON CONFLICT (profile_id) DO NOTHING`,
    [JSON.stringify(rows)],
  )
}

/** Pending work of the sweep, oldest first: overrides to squash and profiles to erase, each with when it was recorded. */
export async function pendingOverrides(db: Queryable, limit: number): Promise<(Override & { recordedAt: Date })[]> {
  const r = await query<OverrideRow & { recorded_at: Date }>(
    db,
    'pendingOverrides',
    `SELECT workspace_id, old_profile_id, new_profile_id, version, recorded_at FROM profile_overrides ORDER BY recorded_at LIMIT $1`,
    [limit],
  )
  return r.rows.map((row) => ({ ...toOverride(false)(row), recordedAt: row.recorded_at }))
}

export async function pendingErasures(db: Queryable, limit: number): Promise<{ workspaceId: string; profileId: number; recordedAt: Date }[]> {
  const r = await query<{ workspace_id: string; profile_id: number; recorded_at: Date }>(
    db,
    'pendingErasures',
    'SELECT workspace_id, profile_id, recorded_at FROM pending_erasures ORDER BY recorded_at LIMIT $1',
    [limit],
  )
  return r.rows.map((row) => ({ workspaceId: row.workspace_id, profileId: row.profile_id, recordedAt: row.recorded_at }))
}

/** When the oldest override or erasure still pending was recorded (null: nothing pending). */
export async function oldestPending(db: Queryable): Promise<Date | null> {
  const r = await query<{ t: Date | null }>(
    db,
    'oldestPending',
    'SELECT least((SELECT min(recorded_at) FROM profile_overrides), (SELECT min(recorded_at) FROM pending_erasures)) AS t',
  )
  return r.rows[0].t
}

/**
 * Forgets what a sweep applied: the overrides it squashed (only at the version it read: one
 * pointed further meanwhile stays, for the next sweep) and the erasures it carried out.
 */
export async function forgetSwept(db: Queryable, squashed: Override[], erased: number[]): Promise<void> {
  if (squashed.length) {
    await query(
      db,
      'forgetSquashedOverrides',
      `DELETE FROM profile_overrides o USING unnest($1::bigint[], $2::bigint[]) AS s(old_id, version)
        WHERE o.old_profile_id = s.old_id AND o.version = s.version`,
      [squashed.map((o) => o.oldProfileId), squashed.map((o) => o.version)],
    )
  }
  if (erased.length) await query(db, 'forgetErasures', 'DELETE FROM pending_erasures WHERE profile_id = ANY($1::bigint[])', [erased])
}

const SWEEP_LOCK = 724154

/**
 * Runs `fn` while holding the sweep's advisory lock, so one process sweeps at a time; answers
 * undefined at once when another holds it. The lock belongs to a connection that is closed
 * afterwards (sweeps are rare): a lock can never stay behind on a pooled connection, and a
 * process that dies lets go with its connection.
 */
export async function withSweepLock<T>(pool: Pool, fn: () => Promise<T>): Promise<T | undefined> {
  const client: pg.PoolClient = await pool.connect()
  try {
    const locked = await query<{ ok: boolean }>(client, 'trySweepLock', 'SELECT pg_try_advisory_lock($1) AS ok', [SWEEP_LOCK])
    return locked.rows[0].ok ? await fn() : undefined
  } finally {
    client.release(true)
  }
}
