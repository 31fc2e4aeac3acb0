import { describe, expect, it } from 'vitest'
import { SELECT_PROFILE } from '../../../shared/db/repositories/profile-repository.js'
import { NoProfileFields, ProfileFieldNames, SettableFields } from '../../../shared/domain/profile-fields.js'
import { FilterableFields } from '../../../shared/domain/segment-filter.js'
import { standardField } from '../../../shared/domain/track-validation.js'
import { ExportableFields } from '../../../shared/domain/user-record.js'

describe('the table of profile fields', () => {
  it('lists the fields in the order of the record (interface.md 2.4)', () => {
    expect(ProfileFieldNames).toEqual([
      'first_name', 'last_name', 'email', 'home_city', 'time_zone', 'dob', 'country', 'phone', 'language', 'gender',
      'push_subscribe', 'email_subscribe', 'push_opted_in_at',
    ])
  })

  it('makes every field one that fields_to_export names (the spec\'s own list) and a segment may filter on', () => {
    expect(ProfileFieldNames.filter((f) => !(ExportableFields as readonly string[]).includes(f))).toEqual([])
    expect(ProfileFieldNames.filter((f) => !(FilterableFields as readonly string[]).includes(f))).toEqual([])
  })

  it('reads every field from its column, the time as ISO 8601 UTC', () => {
    for (const f of ProfileFieldNames) expect(SELECT_PROFILE).toMatch(new RegExp(`p\\.${f}\\b`))
    expect(SELECT_PROFILE).toContain(`to_char(p.push_opted_in_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS push_opted_in_at`)
  })

  it('lets /users/track set every field but the one the service sets, null clearing all but the subscription states', () => {
    expect(SettableFields).toEqual(ProfileFieldNames.filter((f) => f !== 'push_opted_in_at'))
    const cleared = SettableFields.filter((f) => {
      try {
        return standardField(f, null, f) === null
      } catch {
        return false
      }
    })
    expect(cleared).toEqual(SettableFields.filter((f) => f !== 'push_subscribe' && f !== 'email_subscribe'))
  })

  it('starts a new profile with every field unset', () => {
    expect(Object.keys(NoProfileFields)).toEqual(ProfileFieldNames)
    expect(Object.values(NoProfileFields).every((v) => v === null)).toBe(true)
    expect(Object.isFrozen(NoProfileFields)).toBe(true)
  })
})
