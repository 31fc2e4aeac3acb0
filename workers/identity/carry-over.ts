import type { ProfileRow } from '../../shared/db/repositories/profile-repository.js'

/** Standard fields a merge takes from the merged profile when the kept one has no value (interface.md 4.2). */
export const CarriedFields = [
  'first_name', 'last_name', 'email', 'gender', 'dob', 'phone', 'time_zone', 'home_city', 'country', 'language',
  'email_subscribe', 'push_subscribe',
] as const

/**
 * Fills the kept profile from the merged one, in memory: every standard field the kept profile
 * lacks, the custom attributes it lacks (its own stay), and the merged profile's external id when
 * the kept one has none (the id would otherwise vanish with the merged profile, like an alias
 * would; aliases move too). Returns whether the kept profile got an email or phone it lacked,
 * since states stored for that address then apply to it.
 */
export function carryOver(kept: ProfileRow, merged: ProfileRow): { addressCarried: boolean } {
  const addressCarried = (kept.email === null && merged.email !== null) || (kept.phone === null && merged.phone !== null)
  if (kept.push_subscribe === null && merged.push_subscribe !== null) kept.push_opted_in_at = merged.push_opted_in_at
  for (const field of CarriedFields) {
    if (kept[field] === null) kept[field] = merged[field]
  }
  kept.custom_attributes = { ...merged.custom_attributes, ...kept.custom_attributes }
  if (kept.external_id === null) kept.external_id = merged.external_id
  // A temporary push-import profile that absorbs a real user is no longer temporary.
  kept.push_import_anonymous = kept.push_import_anonymous && merged.push_import_anonymous
  return { addressCarried }
}
