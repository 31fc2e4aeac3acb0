import type pg from 'pg'
import { touchProfiles } from '../shared/db/repositories/profile-repository.js'
import { copyAddressGroupStates, copyEmailStates } from '../shared/db/repositories/subscription-state-repository.js'

/**
 * Applies states stored for an email or phone before any profile had it (address subscription
 * states and /email/status) to profiles that now have that address; returns the changed ids.
 * The track worker calls it for profiles whose email or phone a batch set, the identity worker for
 * those a merge carried an address to, each after its own writes: a group state is copied only
 * when it is newer than the profile's own state for that group, while an uploaded email state
 * always replaces `email_subscribe` (it describes the address just tied).
 */
export async function applyPendingAddressStates(
  db: pg.PoolClient,
  workspaceId: string,
  profiles: { id: number; email: string | null; phone: string | null }[],
): Promise<number[]> {
  const withEmail = profiles.flatMap((p) => (p.email ? [{ profile_id: p.id, email: p.email }] : []))
  const withPhone = profiles.flatMap((p) => (p.phone ? [{ profile_id: p.id, address: p.phone }] : []))
  const owned = [...withEmail.map((o) => ({ profile_id: o.profile_id, address: o.email })), ...withPhone]
  if (owned.length === 0) return []
  const changed = [...new Set([...(await copyAddressGroupStates(db, workspaceId, owned)), ...(await copyEmailStates(db, workspaceId, withEmail))])]
  await touchProfiles(db, changed)
  return changed
}
