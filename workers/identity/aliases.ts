import { aliasKey } from '../../shared/db/repositories/profile-repository.js'
import type { IdentityBatch } from './identity-batch.js'
import { identityError, withExternalId, type IdentityError } from './resolve.js'
import type { AliasNewOperation, AliasUpdateOperation } from '../../shared/queue/identity-jobs.js'

/**
 * One element of /users/alias/new with an external id: the alias is added to the user who has it
 * (a deprecated id names its user too). An alias some user already holds is left as it is, without
 * an error, as the reference answers; an external id nobody has adds the alias to nobody.
 */
export async function applyAliasNew(batch: IdentityBatch, op: AliasNewOperation): Promise<IdentityError | undefined> {
  const ref = { inputArray: 'user_aliases', index: op.index }
  if (batch.aliasOwner.has(aliasKey(op.alias.alias_label, op.alias.alias_name))) return undefined
  const user = withExternalId(batch, op.externalId)
  if (!user) return identityError(ref, 'user_not_found', `no user found for external_id ${op.externalId}; the alias was not added`)
  await batch.addAlias(user, op.alias)
  return undefined
}

/** One element of /users/alias/update: the alias (label, old name) takes the new name, unless another alias has it. */
export async function applyAliasUpdate(batch: IdentityBatch, op: AliasUpdateOperation): Promise<IdentityError | undefined> {
  const ref = { inputArray: 'alias_updates', index: op.index }
  const ownerId = batch.aliasOwner.get(aliasKey(op.alias_label, op.old_alias_name))
  const owner = ownerId === undefined ? undefined : batch.byId.get(ownerId)
  if (!owner) return identityError(ref, 'user_not_found', `no user has the alias ${op.alias_label}/${op.old_alias_name}; nothing was updated`)
  if (batch.aliasOwner.has(aliasKey(op.alias_label, op.new_alias_name))) {
    return identityError(ref, 'alias_taken', `the alias ${op.alias_label}/${op.new_alias_name} already exists; nothing was updated`)
  }
  await batch.renameAlias(owner, { alias_label: op.alias_label, old_alias_name: op.old_alias_name, new_alias_name: op.new_alias_name })
  return undefined
}
