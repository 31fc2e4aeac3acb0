import type pg from 'pg'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import { deleteProfiles, lockProfiles } from '../../shared/db/repositories/profile-repository.js'
import { lookupOf, resolveTarget, unresolvedError } from './resolve.js'
import type { DeleteOperation } from './schema.js'

/**
 * One identifier of /users/delete: erases the user. Postgres drops the profile with its aliases,
 * push tokens, summaries and subscription states (cascade); the outbox then deletes the user's
 * event and purchase rows in ClickHouse and writes a snapshot tombstone, so no export or segment
 * count shows the user again.
 */
export async function applyDelete(db: pg.PoolClient, workspaceId: string, op: DeleteOperation): Promise<Outbox> {
  const locked = await lockProfiles(db, workspaceId, lookupOf([op.user]))
  const user = resolveTarget(locked, op.user)
  if (user.kind !== 'one') return { profileIds: [], errors: [unresolvedError(op, op.user, user)] }
  return { profileIds: [], deletedProfiles: await deleteProfiles(db, [user.candidate.id]) }
}
