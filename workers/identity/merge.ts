import type { IdentityBatch } from './identity-batch.js'
import { identityError, resolveTarget, unresolvedError, type IdentityError, type OperationRef } from './resolve.js'
import type { MergeOperation } from '../../shared/queue/identity-jobs.js'

/** One element of /users/merge: resolves both users, then merges, or reports why nothing happened. */
export async function applyMerge(batch: IdentityBatch, op: MergeOperation): Promise<IdentityError | undefined> {
  const ref: OperationRef = { inputArray: 'merge_updates', index: op.index }
  const toMerge = resolveTarget(batch, op.toMerge)
  if (toMerge.kind !== 'one') return unresolvedError(ref, op.toMerge, toMerge)
  const toKeep = resolveTarget(batch, op.toKeep)
  if (toKeep.kind !== 'one') return unresolvedError(ref, op.toKeep, toKeep)
  if (toMerge.candidate.id === toKeep.candidate.id) {
    return identityError(ref, 'same_user', 'identifier_to_merge and identifier_to_keep name the same user; nothing was merged')
  }
  await batch.merge(toMerge.candidate, toKeep.candidate)
  return undefined
}
