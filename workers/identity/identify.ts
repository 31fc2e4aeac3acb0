import type pg from 'pg'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import { insertAliases, lockProfiles, saveProfiles, touchProfiles, type ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { mergeProfiles } from './merge.js'
import { describeTarget, identityError, lookupOf, resolveTarget, unresolvedError, withExternalId } from './resolve.js'
import type { IdentifyOperation } from './schema.js'

/**
 * Gives an unidentified user an external id (interface.md 4.3): when nobody has the id yet the
 * user simply gets it; when an identified user has it, the unidentified user is merged into that
 * one (merge behaviour for every call). Both users are already locked.
 */
async function identifyProfile(
  db: pg.PoolClient,
  workspaceId: string,
  op: IdentifyOperation,
  user: ProfileRow,
  identified: ProfileRow | undefined,
): Promise<Outbox> {
  if (user.external_id === op.externalId) return { profileIds: [] }
  if (user.external_id !== null) {
    const message = `${describeTarget(op.user)} is already identified with another external_id; nothing was changed`
    return { profileIds: [], errors: [identityError(op, 'already_identified', message)] }
  }
  if (identified) return mergeProfiles(db, workspaceId, user, identified)
  user.external_id = op.externalId
  await saveProfiles(db, [], [user])
  return { profileIds: [user.id] }
}

/**
 * One element of /users/identify. An alias that no profile holds yet is added to the user who
 * has the external id, since several aliases may be tied to one external id (4.3 rule 3).
 */
export async function applyIdentify(db: pg.PoolClient, workspaceId: string, op: IdentifyOperation): Promise<Outbox> {
  const locked = await lockProfiles(db, workspaceId, lookupOf([op.user], [op.externalId]))
  const identified = withExternalId(locked, op.externalId)
  const user = resolveTarget(locked, op.user)
  if (user.kind === 'one') return identifyProfile(db, workspaceId, op, user.candidate, identified)
  if (user.kind === 'none' && identified && op.user.kind === 'user_alias') {
    await insertAliases(db, workspaceId, [{ alias_label: op.user.alias_label, alias_name: op.user.alias_name, profile_id: identified.id }])
    await touchProfiles(db, [identified.id])
    return { profileIds: [identified.id] }
  }
  return { profileIds: [], errors: [unresolvedError(op, op.user, user)] }
}
