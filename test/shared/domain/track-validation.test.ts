import { describe, expect, it } from 'vitest'
import { FieldError, customAttribute, identifierOf, parseTime, standardField } from '../../../shared/domain/track-validation.js'

function refusal(check: () => unknown): string | undefined {
  try {
    check()
    return undefined
  } catch (e) {
    if (!(e instanceof FieldError)) throw e
    return e.message
  }
}

describe('parseTime', () => {
  it('takes ISO 8601 with Z or an offset and answers UTC with milliseconds', () => {
    expect(parseTime('2024-05-01T12:00:00Z', 't')).toBe('2024-05-01T12:00:00.000Z')
    expect(parseTime('2024-05-01T12:00Z', 't')).toBe('2024-05-01T12:00:00.000Z')
    expect(parseTime('2024-05-01T14:00:00.5+02:00', 't')).toBe('2024-05-01T12:00:00.500Z')
    expect(parseTime('2024-05-01T07:00:00-0500', 't')).toBe('2024-05-01T12:00:00.000Z')
  })

  // The form parseTime answers is taken as it is; these pin that shortcut to the general path's answer.
  it.each([
    '2024-05-01T12:00:00.000Z', '2024-02-29T23:59:59.999Z', '2000-02-29T00:00:00.000Z', '0000-01-01T00:00:00.000Z',
    '9999-12-31T23:59:59.999Z', '2024-02-30T00:00:00.000Z', '2023-02-29T00:00:00.000Z', '1900-02-29T00:00:00.000Z',
    '2024-04-31T00:00:00.000Z', '2024-02-29T24:00:00.000Z', '2024-05-01T12:00:00.000z',
  ])('answers %s as Date#toISOString of its parse', (value) => {
    expect(parseTime(value, 't')).toBe(new Date(Date.parse(value)).toISOString())
  })

  it.each(['2024-05-01T12:00:00', '2024-05-01', 'May 1 2024', 1714564800000, null, '2024-13-01T00:00:00.000Z', '2024-05-01T12:60:00.000Z', '2024-05-01T12:00:60.000Z', '2024-05-00T12:00:00.000Z', '2024-05-01T12:00:00.0a0Z'])('refuses %s', (value) => {
    expect(refusal(() => parseTime(value, 'events[0].time'))).toBe('events[0].time: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z')
  })
})

describe('identifierOf', () => {
  it('prefers a primary identifier, then email, then phone; a null email or phone does not identify', () => {
    expect(identifierOf({ service_id: 's1', email: 'a@b.co' }, 'x')).toEqual({ kind: 'service_id', value: 's1' })
    expect(identifierOf({ email: null, phone: '+14155552671' }, 'x')).toEqual({ kind: 'phone', value: '+14155552671' })
  })

  it('refuses an over-long external_id and an alias with extra members', () => {
    expect(refusal(() => identifierOf({ external_id: 'u'.repeat(513) }, 'events[1]'))).toBe('events[1].external_id: must be at most 512 characters')
    expect(refusal(() => identifierOf({ user_alias: { alias_name: 'n', alias_label: 'l', x: 1 } }, 'events[1]'))).toBe(
      'events[1].user_alias: must be an object with string alias_name and alias_label',
    )
  })
})

describe('standardField', () => {
  it('clears a field with null, except the subscription states', () => {
    expect(standardField('home_city', null, 'f')).toBeNull()
    expect(refusal(() => standardField('push_subscribe', null, 'attributes[0].push_subscribe'))).toBe('attributes[0].push_subscribe: cannot be null')
  })

  it('checks the subscription states and the length of free text', () => {
    expect(standardField('push_subscribe', 'unsubscribed', 'f')).toBe('unsubscribed')
    expect(refusal(() => standardField('push_subscribe', 'Subscribed', 'p'))).toBe('p: must be one of opted_in, subscribed, unsubscribed')
    expect(standardField('last_name', 'x'.repeat(10_000), 'f')).toHaveLength(10_000)
    expect(refusal(() => standardField('last_name', 'x'.repeat(10_001), 'l'))).toBe('l: must be at most 10000 characters')
  })
})

describe('customAttribute', () => {
  it('takes the value forms of interface.md and refuses the rest with the reason', () => {
    for (const value of ['s', 1, true, null, [1, 'a'], { inc: -3 }, { add: [1] }, { remove: [] }, { nested: { a: 1 } }]) {
      expect(customAttribute('a', value, 'f')).toBe(value)
    }
    expect(refusal(() => customAttribute('a', { add: 1 }, 'attributes[0].a'))).toBe('attributes[0].a: add must be an array')
    expect(refusal(() => customAttribute('', 1, 'attributes[0].'))).toBe('attributes[0].: attribute names must be 1 to 255 characters')
  })
})
