import type { IdentityBatch } from './identity-batch.js'
import { resolveTarget, unresolvedError, type IdentityError } from './resolve.js'
import type { DeleteOperation } from '../../shared/queue/identity-jobs.js'

/**
 * One identifier of /users/delete: erases the user. Postgres drops the profile with its aliases,
 * push tokens and subscription states (cascade); in ClickHouse a snapshot tombstone hides the
 * user (and the events its summaries are read from) from exports, segments and /users/export/ids
 * at once, and the sweep erases the user's rows
 * physically within ERASURE_MAX_DELAY_SECONDS (docs/identity.md).
 */
export async function applyDelete(batch: IdentityBatch, op: DeleteOperation): Promise<IdentityError | undefined> {
  const user = resolveTarget(batch, op.user)
  if (user.kind !== 'one') return unresolvedError(op, op.user, user)
  await batch.delete(user.candidate)
  return undefined
}
