import { describe, expect, it } from 'vitest'
import { applyCustomAttribute, customAttributeProblem, type CustomAttributes } from '../../../shared/domain/attributes.js'

/** The attributes after applying `ops` in order to a copy of `start`. */
function applied(start: CustomAttributes, ...ops: [string, unknown][]): CustomAttributes {
  const attrs = structuredClone(start)
  for (const [name, value] of ops) applyCustomAttribute(attrs, name, value)
  return attrs
}

describe('applyCustomAttribute (interface.md 2.2 value forms)', () => {
  it('sets plain values, replacing what was there, and leaves other attributes alone', () => {
    expect(applied({ plan: 'free', other: 1 }, ['plan', 'gold'])).toEqual({ plan: 'gold', other: 1 })
    expect(applied({}, ['n', 3.5], ['ok', false], ['since', '2026-01-02T03:04:05Z'])).toEqual({ n: 3.5, ok: false, since: '2026-01-02T03:04:05Z' })
    expect(applied({ count: 5 }, ['count', 'five'])).toEqual({ count: 'five' })
  })

  it('sets an array, also of objects, as the whole new value', () => {
    const stays = [{ hotel: 'A', nights: 2, from: '2026-03-01' }, { hotel: 'B', nights: 1, from: '2026-04-01' }]
    expect(applied({ tags: ['x', 'y'] }, ['tags', ['z']])).toEqual({ tags: ['z'] })
    expect(applied({}, ['stays', stays])).toEqual({ stays })
    expect(applied({ tags: ['x'] }, ['tags', []])).toEqual({ tags: [] })
  })

  it('sets a nested object that is no operation as a value', () => {
    expect(applied({}, ['address', { city: 'Oslo', geo: { lat: 59.9 } }])).toEqual({ address: { city: 'Oslo', geo: { lat: 59.9 } } })
    expect(applied({}, ['empty', {}])).toEqual({ empty: {} })
    // Not only add/remove members: a value, not an array edit.
    expect(applied({ tags: ['x'] }, ['tags', { add: ['y'], note: 'n' }])).toEqual({ tags: { add: ['y'], note: 'n' } })
  })

  it('removes the attribute on null, and a null for an absent one changes nothing', () => {
    expect(applied({ plan: 'gold', keep: true }, ['plan', null])).toEqual({ keep: true })
    expect(applied({ keep: true }, ['absent', null])).toEqual({ keep: true })
  })

  it('adds inc to a number, counting from 0 when the attribute is absent or not a number', () => {
    expect(applied({ visits: 4 }, ['visits', { inc: 3 }])).toEqual({ visits: 7 })
    expect(applied({ visits: 4 }, ['visits', { inc: -6 }])).toEqual({ visits: -2 })
    expect(applied({}, ['visits', { inc: 2 }], ['visits', { inc: 2 }])).toEqual({ visits: 4 })
    expect(applied({ visits: 'many' }, ['visits', { inc: 1 }])).toEqual({ visits: 1 })
    expect(applied({ visits: [1] }, ['visits', { inc: 1 }])).toEqual({ visits: 1 })
  })

  it('adds array values once, comparing by value (objects too), in order after the existing ones', () => {
    expect(applied({ tags: ['a', 'b'] }, ['tags', { add: ['b', 'c', 'c'] }])).toEqual({ tags: ['a', 'b', 'c'] })
    expect(applied({ stays: [{ h: 'A' }] }, ['stays', { add: [{ h: 'A' }, { h: 'B' }] }])).toEqual({ stays: [{ h: 'A' }, { h: 'B' }] })
    expect(applied({}, ['tags', { add: ['a'] }])).toEqual({ tags: ['a'] })
    expect(applied({ tags: 'a' }, ['tags', { add: ['b'] }])).toEqual({ tags: ['b'] })
    expect(applied({ nums: [1] }, ['nums', { add: ['1', 1] }])).toEqual({ nums: [1, '1'] })
  })

  it('removes every occurrence of each value, comparing by value', () => {
    expect(applied({ tags: ['a', 'b', 'a', 'c'] }, ['tags', { remove: ['a', 'zz'] }])).toEqual({ tags: ['b', 'c'] })
    expect(applied({ stays: [{ h: 'A' }, { h: 'B' }] }, ['stays', { remove: [{ h: 'B' }] }])).toEqual({ stays: [{ h: 'A' }] })
    expect(applied({}, ['tags', { remove: ['a'] }])).toEqual({ tags: [] })
  })

  it('applies add before remove when one object holds both', () => {
    expect(applied({ tags: ['a', 'b'] }, ['tags', { add: ['c', 'd'], remove: ['a', 'd'] }])).toEqual({ tags: ['b', 'c'] })
  })

  it('leaves the array it edits untouched and stores a new one', () => {
    const tags = ['a']
    const attrs: CustomAttributes = { tags }
    applyCustomAttribute(attrs, 'tags', { add: ['b'] })
    expect(tags).toEqual(['a'])
    expect(attrs.tags).toEqual(['a', 'b'])
  })

  it('applies forms in order: a later set, null or inc sees the earlier ones', () => {
    expect(applied({}, ['v', { inc: 1 }], ['v', null], ['v', { inc: 5 }])).toEqual({ v: 5 })
    expect(applied({}, ['v', ['x']], ['v', { add: ['y'] }], ['v', 'plain'])).toEqual({ v: 'plain' })
  })
})

describe('customAttributeProblem', () => {
  it('accepts every value form of interface.md 2.2', () => {
    for (const v of ['s', '2026-01-02T03:04:05Z', 0, -1.5, true, null, [], [1, 'a', { o: 1 }], { inc: 2 }, { inc: -2 }, { add: ['a'] }, { remove: [1] }, { add: [], remove: [] }, { nested: { deep: [1] } }, {}]) {
      expect(customAttributeProblem(v), JSON.stringify(v)).toBeUndefined()
    }
  })

  it('names what is wrong with a refused value', () => {
    expect(customAttributeProblem(Number.NaN)).toBe('must be a finite number')
    expect(customAttributeProblem(Number.POSITIVE_INFINITY)).toBe('must be a finite number')
    expect(customAttributeProblem({ inc: 1.5 })).toBe('inc must be an integer')
    expect(customAttributeProblem({ inc: '1' })).toBe('inc must be an integer')
    expect(customAttributeProblem({ inc: 1, by: 2 })).toBe('an inc object must have only the inc member')
    expect(customAttributeProblem({ add: 'a' })).toBe('add must be an array')
    expect(customAttributeProblem({ add: ['a'], remove: 'b' })).toBe('remove must be an array')
    expect(customAttributeProblem(undefined)).toBe('unsupported value')
    expect(customAttributeProblem(10n)).toBe('unsupported value')
  })
})
