import { describe, expect, it } from 'vitest'
import { SELECT_PROFILE } from '../../../shared/db/repositories/profile-repository.js'
import { FilteredProfileFields, NoProfileFields, ProfileFieldNames, SettableFieldRules, SettableFields } from '../../../shared/domain/profile-fields.js'
import { FilterableFields } from '../../../shared/domain/segment-filter.js'
import { standardField } from '../../../shared/domain/track-validation.js'
import { ExportableFields } from '../../../shared/domain/user-record.js'

describe('the table of profile fields', () => {
  it('lists the fields in the order of the record (interface.md 2.4), then the reference\'s other standard fields', () => {
    expect(ProfileFieldNames).toEqual([
      'first_name', 'last_name', 'email', 'home_city', 'time_zone', 'dob', 'country', 'phone', 'language', 'gender',
      'last_coordinates', 'push_subscribe', 'email_subscribe', 'push_opted_in_at',
      'image_url', 'date_of_first_session', 'date_of_last_session', 'marked_email_as_spam_at', 'email_open_tracking_disabled',
      'email_click_tracking_disabled', 'facebook', 'twitter',
    ])
  })

  it('makes every field one that fields_to_export names (the spec\'s own list), and those of interface.md 2.4 ones a segment may filter on', () => {
    expect(ProfileFieldNames.filter((f) => !(ExportableFields as readonly string[]).includes(f))).toEqual([])
    expect(FilteredProfileFields.filter((f) => !(FilterableFields as readonly string[]).includes(f))).toEqual([])
    // The fields without a ClickHouse column of their own (segment-sql.ts) are not filtered on.
    expect(ProfileFieldNames.filter((f) => !(FilterableFields as readonly string[]).includes(f))).toEqual([
      'last_coordinates', 'image_url', 'date_of_first_session', 'date_of_last_session', 'marked_email_as_spam_at',
      'email_open_tracking_disabled', 'email_click_tracking_disabled', 'facebook', 'twitter',
    ])
  })

  it('reads every field from its column, the time as ISO 8601 UTC', () => {
    for (const f of ProfileFieldNames) expect(SELECT_PROFILE).toMatch(new RegExp(`p\\.${f}\\b`))
    expect(SELECT_PROFILE).toContain(`to_char(p.push_opted_in_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS push_opted_in_at`)
  })

  it('lets /users/track set every field but the one the service sets, by its name or (last_coordinates) the reference\'s', () => {
    expect(SettableFields).toEqual(ProfileFieldNames.filter((f) => f !== 'push_opted_in_at'))
    expect([...SettableFieldRules].filter(([member, rule]) => member !== rule.field)).toEqual([['current_location', expect.objectContaining({ field: 'last_coordinates' })]])
  })

  it('lets null clear every field but the subscription states, a flag to false', () => {
    const cleared = [...SettableFieldRules.keys()].flatMap((member) => {
      try {
        return [[member, standardField(member, null, member)]]
      } catch {
        return []
      }
    })
    expect(Object.fromEntries(cleared)).toEqual(
      Object.fromEntries(
        [...SettableFieldRules].filter(([m]) => m !== 'push_subscribe' && m !== 'email_subscribe').map(([m, rule]) => [m, rule.kind === 'flag' ? false : null]),
      ),
    )
  })

  it('starts a new profile with every field unset: null, a flag false', () => {
    expect(Object.keys(NoProfileFields)).toEqual(ProfileFieldNames)
    expect(Object.entries(NoProfileFields).filter(([, v]) => v !== null)).toEqual([
      ['email_open_tracking_disabled', false],
      ['email_click_tracking_disabled', false],
    ])
    expect(Object.isFrozen(NoProfileFields)).toBe(true)
  })
})
