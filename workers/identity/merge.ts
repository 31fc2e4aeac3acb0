import type pg from 'pg'
import { moveEventSummaries } from '../../shared/db/repositories/event-summary-repository.js'
import { copyMissingSubscriptions, moveAliases, movePushTokens } from '../../shared/db/repositories/identity-repository.js'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import { deleteProfiles, lockProfiles, saveProfiles, type ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { applyPendingAddressStates } from '../track/subscription-changes.js'
import { carryOver } from './carry-over.js'
import { identityError, lookupOf, resolveTarget, unresolvedError, type OperationRef } from './resolve.js'
import type { MergeOperation } from './schema.js'

/**
 * Folds `merged` into `kept` inside the caller's transaction (both already locked): fields and
 * custom attributes the kept profile lacks, push tokens, aliases, subscription states (the kept
 * profile's win), and event and purchase summaries (counts summed, earlier first, later last).
 * The merged profile is then deleted. Its ClickHouse history moves to the kept profile through
 * the outbox: `syncClickHouse` runs `reassign` before it deletes the rows of deleted profiles, so
 * the history is copied before the merged profile's rows go.
 */
export async function mergeProfiles(db: pg.PoolClient, workspaceId: string, merged: ProfileRow, kept: ProfileRow): Promise<Outbox> {
  const { addressCarried } = carryOver(kept, merged)
  await moveAliases(db, merged.id, kept.id)
  await movePushTokens(db, merged.id, kept.id)
  await copyMissingSubscriptions(db, merged.id, kept.id)
  await moveEventSummaries(db, merged.id, kept.id)
  // Deleted before the kept row is saved: an external id carried over is unique per workspace.
  const deletedProfiles = await deleteProfiles(db, [merged.id])
  await saveProfiles(db, [], [kept])
  const stateful = addressCarried ? await applyPendingAddressStates(db, workspaceId, [kept]) : []
  return {
    profileIds: [...new Set([kept.id, ...stateful])],
    deletedProfiles,
    reassign: [{ from: merged.id, to: kept.id }],
  }
}

/** One element of /users/merge: resolves both users, then merges, or reports why nothing happened. */
export async function applyMerge(db: pg.PoolClient, workspaceId: string, op: MergeOperation): Promise<Outbox> {
  const ref: OperationRef = { inputArray: 'merge_updates', index: op.index }
  const locked = await lockProfiles(db, workspaceId, lookupOf([op.toMerge, op.toKeep]))
  const toMerge = resolveTarget(locked, op.toMerge)
  if (toMerge.kind !== 'one') return { profileIds: [], errors: [unresolvedError(ref, op.toMerge, toMerge)] }
  const toKeep = resolveTarget(locked, op.toKeep)
  if (toKeep.kind !== 'one') return { profileIds: [], errors: [unresolvedError(ref, op.toKeep, toKeep)] }
  if (toMerge.candidate.id === toKeep.candidate.id) {
    return { profileIds: [], errors: [identityError(ref, 'same_user', 'identifier_to_merge and identifier_to_keep name the same user; nothing was merged')] }
  }
  return mergeProfiles(db, workspaceId, toMerge.candidate, toKeep.candidate)
}
