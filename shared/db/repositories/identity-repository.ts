import { query, type Queryable } from '../pool.js'

/** Merges applied together: each `from` is folded into its `to`; no profile appears in two of them. */
export interface MergePair {
  from: number
  to: number
}

const pairParams = (pairs: MergePair[]) => [pairs.map((p) => p.from), pairs.map((p) => p.to)]
const PAIRS = 'unnest($1::bigint[], $2::bigint[]) AS m(from_id, to_id)'

/** A merge hands every alias of the merged profile to the kept one, so the alias names the kept user from now on. */
export async function moveAliases(db: Queryable, pairs: MergePair[]): Promise<void> {
  if (pairs.length === 0) return
  await query(db, 'moveAliases', `UPDATE profile_aliases a SET profile_id = m.to_id FROM ${PAIRS} WHERE a.profile_id = m.from_id`, pairParams(pairs))
}

/** A merge moves the merged profile's push tokens (its devices) to the kept profile. */
export async function movePushTokens(db: Queryable, pairs: MergePair[]): Promise<void> {
  if (pairs.length === 0) return
  await query(db, 'movePushTokens', `UPDATE push_tokens t SET profile_id = m.to_id FROM ${PAIRS} WHERE t.profile_id = m.from_id`, pairParams(pairs))
}

/**
 * A merge copies the merged profile's subscription-group states for groups the kept profile has
 * no state in; a state the kept profile already holds wins.
 */
export async function copyMissingSubscriptions(db: Queryable, pairs: MergePair[]): Promise<void> {
  if (pairs.length === 0) return
  await query(
    db,
    'copyMissingSubscriptions',
    `INSERT INTO profile_subscriptions (profile_id, group_id, state, updated_at)
     SELECT m.to_id, s.group_id, s.state, s.updated_at FROM profile_subscriptions s JOIN ${PAIRS} ON s.profile_id = m.from_id
     ON CONFLICT (profile_id, group_id) DO NOTHING`,
    pairParams(pairs),
  )
}

/** An alias renamed under its label (/users/alias/update). */
export interface AliasRename {
  alias_label: string
  old_alias_name: string
  new_alias_name: string
}

/** Renames aliases one after the other, in the order given: a later rename may take a name an earlier one freed. */
export async function renameAliases(db: Queryable, workspaceId: string, renames: AliasRename[]): Promise<void> {
  for (const r of renames) {
    await query(
      db,
      'renameAlias',
      'UPDATE profile_aliases SET alias_name = $4 WHERE workspace_id = $1 AND alias_label = $2 AND alias_name = $3',
      [workspaceId, r.alias_label, r.old_alias_name, r.new_alias_name],
    )
  }
}
