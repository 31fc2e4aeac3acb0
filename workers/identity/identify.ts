import type { ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { describeIdentifier } from '../../shared/domain/identifiers.js'
import type { IdentityBatch } from './identity-batch.js'
import { identityError, resolveTarget, unresolvedError, withExternalId, type IdentityError } from './resolve.js'
import type { IdentifyOperation } from '../../shared/queue/identity-jobs.js'

/**
 * Gives an unidentified user an external id (interface.md 4.3): when nobody has the id yet the
 * user simply gets it; when an identified user has it, the unidentified user is merged into that
 * one (merge behaviour for every call).
 */
async function identifyProfile(batch: IdentityBatch, op: IdentifyOperation, user: ProfileRow, identified: ProfileRow | undefined): Promise<IdentityError | undefined> {
  if (user.external_id === op.externalId) return undefined
  if (user.external_id !== null) {
    return identityError(op, 'already_identified', `${describeIdentifier(op.user)} is already identified with another external_id; nothing was changed`)
  }
  if (identified) await batch.merge(user, identified)
  else await batch.setExternalId(user, op.externalId)
  return undefined
}

/**
 * One element of /users/identify. An alias that no profile holds yet is added to the user who
 * has the external id, since several aliases may be tied to one external id (4.3 rule 3).
 */
export async function applyIdentify(batch: IdentityBatch, op: IdentifyOperation): Promise<IdentityError | undefined> {
  const identified = withExternalId(batch, op.externalId)
  const user = resolveTarget(batch, op.user)
  if (user.kind === 'one') return identifyProfile(batch, op, user.candidate, identified)
  if (user.kind === 'none' && identified && op.user.kind === 'user_alias') {
    await batch.addAlias(identified, { alias_label: op.user.alias_label, alias_name: op.user.alias_name })
    return undefined
  }
  return unresolvedError(op, op.user, user)
}
