import { aliasKey, type LockedProfiles, type ProfileLookup, type ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { describeIdentifier } from '../../shared/domain/identifiers.js'
import type { ObjectError } from '../../shared/domain/object-error.js'
import { choose, type Choice } from '../../shared/domain/prioritization.js'
import type { IdentityTarget } from '../../shared/queue/identity-jobs.js'

/** A non-fatal error of one identity operation, reported on the request (GET /requests/{id}). */
export type IdentityError = ObjectError<
  'user_not_found' | 'ambiguous_user' | 'same_user' | 'already_identified' | 'alias_taken' | 'external_id_taken' | 'not_primary' | 'not_deprecated'
>

/** Where an operation came from in its request, for the errors it reports. */
export interface OperationRef {
  inputArray: string
  index: number
}

export function identityError(ref: OperationRef, type: IdentityError['type'], message: string): IdentityError {
  return { type, input_array: ref.inputArray, index: ref.index, message }
}

/**
 * What to lock so that every target can be resolved, with the external ids and aliases operations
 * name besides their targets (identify's and alias_new's external id, both names of a renamed
 * alias, both ids of a rename).
 */
export function lookupOf(targets: IdentityTarget[], externalIds: string[] = [], aliases: { alias_label: string; alias_name: string }[] = []): ProfileLookup {
  const values = (kind: IdentityTarget['kind']) => targets.flatMap((t) => (t.kind === kind && 'value' in t ? [t.value] : []))
  return {
    externalIds: [...values('external_id'), ...externalIds],
    serviceIds: values('service_id'),
    emails: values('email'),
    phones: values('phone'),
    aliases: [...targets.flatMap((t) => (t.kind === 'user_alias' ? [{ alias_label: t.alias_label, alias_name: t.alias_name }] : [])), ...aliases],
  }
}

/** The profile an external id names among the locked ones: its primary id, else a deprecated one it kept (rename). */
export function withExternalId(locked: LockedProfiles, externalId: string): ProfileRow | undefined {
  const primary = [...locked.byId.values()].find((p) => p.external_id === externalId)
  if (primary) return primary
  const owner = locked.deprecatedOwner?.get(externalId)
  return owner === undefined ? undefined : locked.byId.get(owner)
}

/** The user a target names: exactly one, none, or several that the prioritization could not tell apart. */
export function resolveTarget(locked: LockedProfiles, target: IdentityTarget): Choice<ProfileRow> {
  const profiles = [...locked.byId.values()]
  switch (target.kind) {
    case 'user_alias': {
      const owner = locked.aliasOwner.get(aliasKey(target.alias_label, target.alias_name))
      const profile = owner === undefined ? undefined : locked.byId.get(owner)
      return profile ? { kind: 'one', candidate: profile } : { kind: 'none' }
    }
    case 'external_id': {
      const user = withExternalId(locked, target.value)
      return user ? { kind: 'one', candidate: user } : { kind: 'none' }
    }
    case 'service_id':
      return choose(profiles.filter((p) => p.service_id === target.value), [])
    case 'email':
      return choose(profiles.filter((p) => p.email === target.value), target.prioritization)
    case 'phone':
      return choose(profiles.filter((p) => p.phone === target.value), target.prioritization)
  }
}

/** The error to report when a target did not resolve to exactly one user. */
export function unresolvedError(ref: OperationRef, target: IdentityTarget, choice: Exclude<Choice<ProfileRow>, { kind: 'one' }>): IdentityError {
  return choice.kind === 'none'
    ? identityError(ref, 'user_not_found', `no user found for ${describeIdentifier(target)}`)
    : identityError(ref, 'ambiguous_user', `${describeIdentifier(target)} matches ${choice.count} users after prioritization; nothing was changed`)
}
