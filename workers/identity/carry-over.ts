import type { ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { ProfileFields, isUnset } from '../../shared/domain/profile-fields.js'

/**
 * Fills the kept profile from the merged one, in memory (interface.md 4.2): every profile field
 * the kept profile lacks, the custom attributes it lacks (its own stay), and the merged profile's external id when
 * the kept one has none (the id would otherwise vanish with the merged profile, like an alias
 * would; aliases move too). Returns whether the kept profile got an email or phone it lacked,
 * since states stored for that address then apply to it.
 */
export function carryOver(kept: ProfileRow, merged: ProfileRow): { addressCarried: boolean } {
  const addressCarried = (kept.email === null && merged.email !== null) || (kept.phone === null && merged.phone !== null)
  // Chosen on the kept profile as it was: a field that follows another (push_opted_in_at) comes with it.
  const carried = ProfileFields.filter((f) => ('follows' in f ? isUnset(kept[f.follows]) && !isUnset(merged[f.follows]) : isUnset(kept[f.name])))
  for (const f of carried) (kept as unknown as Record<string, unknown>)[f.name] = merged[f.name]
  kept.custom_attributes = { ...merged.custom_attributes, ...kept.custom_attributes }
  if (kept.external_id === null) kept.external_id = merged.external_id
  // A temporary push-import profile that absorbs a real user is no longer temporary.
  kept.push_import_anonymous = kept.push_import_anonymous && merged.push_import_anonymous
  return { addressCarried }
}
