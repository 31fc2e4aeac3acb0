import { query, type Queryable } from '../pool.js'

/** A merge hands every alias of the merged profile to the kept one, so the alias names the kept user from now on. */
export async function moveAliases(db: Queryable, fromProfile: number, toProfile: number): Promise<void> {
  await query(db, 'moveAliases', 'UPDATE profile_aliases SET profile_id = $2 WHERE profile_id = $1', [fromProfile, toProfile])
}

/** A merge moves the merged profile's push tokens (its devices) to the kept profile. */
export async function movePushTokens(db: Queryable, fromProfile: number, toProfile: number): Promise<void> {
  await query(db, 'movePushTokens', 'UPDATE push_tokens SET profile_id = $2 WHERE profile_id = $1', [fromProfile, toProfile])
}

/**
 * A merge copies the merged profile's subscription-group states for groups the kept profile has
 * no state in; a state the kept profile already holds wins.
 */
export async function copyMissingSubscriptions(db: Queryable, fromProfile: number, toProfile: number): Promise<void> {
  await query(
    db,
    'copyMissingSubscriptions',
    `INSERT INTO profile_subscriptions (profile_id, group_id, state, updated_at)
     SELECT $2, group_id, state, updated_at FROM profile_subscriptions WHERE profile_id = $1
     ON CONFLICT (profile_id, group_id) DO NOTHING`,
    [fromProfile, toProfile],
  )
}
