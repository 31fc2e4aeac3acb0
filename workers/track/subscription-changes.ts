import type pg from 'pg'
import { findDeprecatedExternalIds } from '../../shared/db/repositories/external-id-repository.js'
import { touchProfiles } from '../../shared/db/repositories/profile-repository.js'
import {
  lockProfilesByKeys,
  setEmailSubscribeByAddress,
  writeAddressGroupStates,
  writeEmailStates,
  writeProfileGroupStates,
  type AddressGroupState,
  type ProfileGroupState,
  type ProfileKeys,
} from '../../shared/db/repositories/subscription-state-repository.js'
import { findSubscriptionGroups } from '../../shared/db/repositories/subscription-group-repository.js'
import type { EmailStateChange, SubscriptionChange } from '../../shared/queue/track-jobs.js'

const unique = <T>(values: T[]) => [...new Set(values)]

function keysOf(changes: SubscriptionChange[]) {
  const values = (kind: SubscriptionChange['key']['kind']) => unique(changes.filter((c) => c.key.kind === kind).map((c) => c.key.value))
  return { externalIds: values('external_id'), emails: values('email'), phones: values('phone') }
}

/**
 * The profiles a user key names: one for an external id (its primary id, or a deprecated one a
 * rename kept), every profile having an email or phone.
 */
function profilesNamedBy(key: SubscriptionChange['key'], profiles: ProfileKeys[], deprecatedOwner: ReadonlyMap<string, number>): number[] {
  const named = profiles.filter((p) => p[key.kind] === key.value).map((p) => p.id)
  const owner = key.kind === 'external_id' && named.length === 0 ? deprecatedOwner.get(key.value) : undefined
  return owner === undefined ? named : [owner]
}

/** One row per (profile, group): the last change in job order wins. */
function latestProfileStates(changes: SubscriptionChange[], profiles: ProfileKeys[], deprecatedOwner: ReadonlyMap<string, number>): ProfileGroupState[] {
  const latest = new Map<string, ProfileGroupState>()
  for (const c of changes) {
    for (const id of profilesNamedBy(c.key, profiles, deprecatedOwner)) {
      latest.set(`${id}\u001f${c.subscription_group_id}`, { profile_id: id, group_id: c.subscription_group_id, state: c.subscription_state })
    }
  }
  return [...latest.values()]
}

/** One row per (address, group) for changes made by email or phone: the last change wins. */
function latestAddressStates(changes: SubscriptionChange[]): AddressGroupState[] {
  const latest = new Map<string, AddressGroupState>()
  for (const c of changes) {
    if (c.key.kind === 'external_id') continue
    latest.set(`${c.key.value}\u001f${c.subscription_group_id}`, { group_id: c.subscription_group_id, address: c.key.value, state: c.subscription_state })
  }
  return [...latest.values()]
}

/**
 * Applies /subscription/status/set changes; returns the ids of profiles it changed.
 * An external id no profile has is ignored (only /users/track creates profiles). An email or
 * phone sets every profile having it and is also stored for the address, so a profile that gets
 * the address later gets the state. A group deleted since the request was accepted is skipped.
 */
export async function applySubscriptionChanges(db: pg.PoolClient, workspaceId: string, changes: SubscriptionChange[]): Promise<number[]> {
  if (changes.length === 0) return []
  const groups = await findSubscriptionGroups(db, workspaceId, unique(changes.map((c) => c.subscription_group_id)))
  const live = changes.filter((c) => groups.has(c.subscription_group_id))
  const keys = keysOf(live)
  const deprecated = await findDeprecatedExternalIds(db, workspaceId, keys.externalIds)
  const profiles = await lockProfilesByKeys(db, workspaceId, { ...keys, profileIds: deprecated.map((d) => d.profile_id) })
  const deprecatedOwner = new Map(deprecated.map((d) => [d.external_id, d.profile_id]))
  const changed = await writeProfileGroupStates(db, latestProfileStates(live, profiles, deprecatedOwner))
  await writeAddressGroupStates(db, workspaceId, latestAddressStates(live))
  await touchProfiles(db, changed)
  return changed
}

/**
 * Applies /email/status changes; returns the ids of profiles it changed. The state is stored for
 * the address whether or not a profile has it, and set on every profile that has it.
 */
export async function applyEmailStateChanges(db: pg.PoolClient, workspaceId: string, changes: EmailStateChange[]): Promise<number[]> {
  if (changes.length === 0) return []
  const latest = [...new Map(changes.map((c) => [c.email, { email: c.email, state: c.subscription_state }])).values()]
  await writeEmailStates(db, workspaceId, latest)
  await lockProfilesByKeys(db, workspaceId, { externalIds: [], emails: latest.map((l) => l.email), phones: [] })
  const changed = await setEmailSubscribeByAddress(db, workspaceId, latest)
  await touchProfiles(db, changed)
  return changed
}
