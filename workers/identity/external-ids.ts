import type { IdentityBatch } from './identity-batch.js'
import { identityError, withExternalId, type IdentityError } from './resolve.js'
import type { RemoveExternalIdOperation, RenameExternalIdOperation } from '../../shared/queue/identity-jobs.js'

/**
 * One element of /users/external_ids/rename, under the reference's rules: the current id must be
 * a user's primary id (not a deprecated one), and the new id must name nobody, as a primary or a
 * deprecated id. The old id is then deprecated: it names the user until it is removed.
 */
export async function applyRenameExternalId(batch: IdentityBatch, op: RenameExternalIdOperation): Promise<IdentityError | undefined> {
  const ref = { inputArray: 'external_id_renames', index: op.index }
  const user = withExternalId(batch, op.currentExternalId)
  if (!user) return identityError(ref, 'user_not_found', `no user found for current_external_id ${op.currentExternalId}`)
  if (user.external_id !== op.currentExternalId) {
    return identityError(ref, 'not_primary', `current_external_id ${op.currentExternalId} is a deprecated external id; rename the user's primary id ${user.external_id}`)
  }
  if (withExternalId(batch, op.newExternalId)) {
    return identityError(ref, 'external_id_taken', `new_external_id ${op.newExternalId} is already in use as a primary or deprecated external id`)
  }
  await batch.renameExternalId(user, op.newExternalId)
  return undefined
}

/** One element of /users/external_ids/remove: only a deprecated id can be removed; a primary id is an error. */
export async function applyRemoveExternalId(batch: IdentityBatch, op: RemoveExternalIdOperation): Promise<IdentityError | undefined> {
  const ref = { inputArray: 'external_ids', index: op.index }
  if (batch.deprecatedOwner.has(op.externalId)) {
    await batch.removeDeprecatedExternalId(op.externalId)
    return undefined
  }
  if (withExternalId(batch, op.externalId)) {
    return identityError(ref, 'not_deprecated', `${op.externalId} is a primary external id; only deprecated external ids can be removed`)
  }
  return identityError(ref, 'user_not_found', `no user has the deprecated external id ${op.externalId}`)
}
