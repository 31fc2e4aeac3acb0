import { describe, expect, it } from 'vitest'
import {
  MAX_NESTED_BYTES,
  applyCustomAttribute,
  customAttributeProblem,
  deepMerge,
  nestedSizeProblem,
  type AttributeProblem,
  type CustomAttributes,
} from '../../../shared/domain/attributes.js'

/** The attributes after applying `ops` in order to a copy of `start`. */
function applied(start: CustomAttributes, ...ops: [string, unknown][]): CustomAttributes {
  const attrs = structuredClone(start)
  for (const [name, value] of ops) applyCustomAttribute(attrs, name, value)
  return attrs
}

/** The attributes and problems after applying `ops`, with `_merge_objects` as told. */
function appliedWith(merge: boolean, start: CustomAttributes, ...ops: [string, unknown][]): { attrs: CustomAttributes; problems: AttributeProblem[] } {
  const attrs = structuredClone(start)
  const problems: AttributeProblem[] = []
  for (const [name, value] of ops) {
    const p = applyCustomAttribute(attrs, name, value, merge)
    if (p) problems.push(p)
  }
  return { attrs, problems }
}

const pets = [
  { id: 1, type: 'dog', breed: 'beagle', name: 'Gus', vet: { name: 'Ada', phone: '1' } },
  { id: 2, type: 'cat', breed: 'calico', name: 'Gerald' },
  { id: 4, type: 'fish', breed: 'salmon', name: 'Larry' },
]
const byId = (id: number) => ({ $identifier_key: 'id', $identifier_value: id })

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

describe('applyCustomAttribute: nested custom attributes (the reference\'s arrays of objects and objects)', () => {
  it('adds objects with $add, after the items held (an absent attribute starts empty), duplicates too', () => {
    expect(applied({ pets }, ['pets', { $add: [{ id: 5, name: 'Mary' }, { id: 1, name: 'Gus' }] }]).pets).toEqual([...pets, { id: 5, name: 'Mary' }, { id: 1, name: 'Gus' }])
    expect(applied({}, ['pets', { $add: [{ id: 1 }] }])).toEqual({ pets: [{ id: 1 }] })
    expect(applied({ pets: 'none' }, ['pets', { $add: [{ id: 1 }] }])).toEqual({ pets: [{ id: 1 }] })
  })

  it('removes every item whose member equals the value with $remove, and nothing else', () => {
    expect(applied({ pets }, ['pets', { $remove: [byId(1), { $identifier_key: 'type', $identifier_value: 'fish' }] }]).pets).toEqual([pets[1]])
    // Values compare as they are: the string "2" is not the number 2.
    expect(applied({ pets }, ['pets', { $remove: [{ $identifier_key: 'id', $identifier_value: '2' }, byId(9)] }]).pets).toEqual(pets)
    expect(applied({ tags: ['a'] }, ['pets', { $remove: [byId(1)] }])).toEqual({ tags: ['a'] })
  })

  it('replaces the items $update finds with $new_object, or deep-merges into them with _merge_objects', () => {
    const update = { $update: [{ ...byId(1), $new_object: { breed: 'corgi', vet: { phone: '2' } } }] }
    const replaced = appliedWith(false, { pets }, ['pets', update])
    expect(replaced.attrs.pets).toEqual([{ breed: 'corgi', vet: { phone: '2' } }, pets[1], pets[2]])
    const merged = appliedWith(true, { pets }, ['pets', update])
    expect(merged.attrs.pets).toEqual([{ id: 1, type: 'dog', breed: 'corgi', name: 'Gus', vet: { name: 'Ada', phone: '2' } }, pets[1], pets[2]])
    expect(merged.problems).toEqual([])
  })

  it('applies $add, $update and $remove of one value in the order they are written', () => {
    const edit = { $remove: [byId(2)], $add: [{ id: 2, name: 'New' }], $update: [{ ...byId(2), $new_object: { name: 'Newer' } }] }
    expect(appliedWith(true, { pets }, ['pets', edit]).attrs.pets).toEqual([pets[0], pets[2], { id: 2, name: 'Newer' }])
  })

  it('answers the items $update did not find, applying the rest', () => {
    const { attrs, problems } = appliedWith(true, { pets }, ['pets', { $update: [{ ...byId(9), $new_object: { a: 1 } }, { ...byId(4), $new_object: { name: 'L' } }] }])
    expect(attrs.pets).toEqual([pets[0], pets[1], { ...pets[2], name: 'L' }])
    expect(problems).toEqual([{ type: 'nested_item_not_found', message: 'pets: $update found no item with id 9' }])
    expect(appliedWith(true, {}, ['pets', { $update: [{ ...byId(1), $new_object: {} }] }])).toEqual({
      attrs: {},
      problems: [{ type: 'nested_item_not_found', message: 'pets: is no array of objects; $update found nothing to update' }],
    })
  })

  it('deep-merges an object into the object stored with _merge_objects, else replaces it; an array or a non-object is replaced', () => {
    const song = { name: 'Solea', artist: 'Miles Davis', plays: { count: 1000, top: true } }
    expect(appliedWith(true, { song }, ['song', { year: 1960, plays: { count: 1001 } }]).attrs.song).toEqual({ ...song, year: 1960, plays: { count: 1001, top: true } })
    expect(appliedWith(false, { song }, ['song', { year: 1960 }]).attrs.song).toEqual({ year: 1960 })
    expect(appliedWith(true, { song: 'x' }, ['song', { year: 1960 }]).attrs.song).toEqual({ year: 1960 })
    expect(appliedWith(true, { song }, ['song', [1]]).attrs.song).toEqual([1])
    // A null member stays, as a null: merging cannot remove a nested member.
    expect(appliedWith(true, { song }, ['song', { artist: null }]).attrs.song).toEqual({ ...song, artist: null })
  })

  it('leaves the attribute unchanged, answering why, when an edit or a merge would make it larger than the limit', () => {
    const half = 'x'.repeat(MAX_NESTED_BYTES / 2)
    const start = { pets: [{ id: 1, blob: half }], song: { a: half } }
    const { attrs, problems } = appliedWith(
      true,
      start,
      ['pets', { $add: [{ id: 2, blob: half }] }],
      ['pets', { $update: [{ ...byId(1), $new_object: { more: half } }] }],
      ['song', { b: half }],
      ['pets', { $add: [{ id: 3 }] }],
    )
    expect(attrs).toEqual({ pets: [{ id: 1, blob: half }, { id: 3 }], song: { a: half } })
    expect(problems.map((p) => p.type)).toEqual(['nested_value_too_large', 'nested_value_too_large', 'nested_value_too_large'])
    expect(problems[0].message).toBe('pets: would be larger than 100 KB (102400 bytes of JSON); not applied, the attribute is unchanged')
    expect(problems[2].message).toBe('song: merged, would be larger than 100 KB (102400 bytes of JSON); not applied, the attribute is unchanged')
  })

  it('changes neither the items stored nor the job\'s values', () => {
    const stored = { pets: structuredClone(pets) }
    const before = structuredClone(stored)
    const update = { $update: [{ ...byId(1), $new_object: { vet: { phone: '9' } } }] }
    const sent = structuredClone(update)
    const attrs: CustomAttributes = { ...stored }
    applyCustomAttribute(attrs, 'pets', update, true)
    expect(stored).toEqual(before)
    expect(update).toEqual(sent)
    expect(deepMerge({ a: { b: 1 } }, { a: { c: 2 } })).toEqual({ a: { b: 1, c: 2 } })
    // A member named __proto__, as JSON.parse makes it, is merged as data.
    const merged = deepMerge(JSON.parse('{"__proto__": {"a": 1}}'), JSON.parse('{"__proto__": {"b": 2}}'))
    expect(JSON.stringify(merged)).toBe('{"__proto__":{"a":1,"b":2}}')
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype)
  })
})

describe('nestedSizeProblem', () => {
  it('measures objects, arrays holding an object and edits that add or update, and nothing else', () => {
    const big = 'x'.repeat(MAX_NESTED_BYTES)
    const refused = 'is larger than 100 KB (102400 bytes of JSON), the limit of a nested value; not stored'
    expect(nestedSizeProblem({ a: big })).toBe(refused)
    expect(nestedSizeProblem([1, { a: big }])).toBe(refused)
    expect(nestedSizeProblem({ $add: [{ a: big }] })).toBe(refused)
    expect(nestedSizeProblem({ $update: [{ ...byId(1), $new_object: { a: big } }] })).toBe(refused)
    expect(nestedSizeProblem([big])).toBeUndefined()
    expect(nestedSizeProblem({ add: [big] })).toBeUndefined()
    expect(nestedSizeProblem({ $remove: [{ $identifier_key: 'id', $identifier_value: big }] })).toBeUndefined()
    expect(nestedSizeProblem({ a: 'x'.repeat(MAX_NESTED_BYTES - 10) })).toBeUndefined()
  })
})

describe('customAttributeProblem', () => {
  it('accepts every value form of interface.md 2.2', () => {
    for (const v of ['s', '2026-01-02T03:04:05Z', 0, -1.5, true, null, [], [1, 'a', { o: 1 }], { inc: 2 }, { inc: -2 }, { add: ['a'] }, { remove: [1] }, { add: [], remove: [] }, { nested: { deep: [1] } }, {}, { $add: [] }, { $remove: [byId(1)] }, { nested: { $time: '2020-05-28' } }]) {
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
