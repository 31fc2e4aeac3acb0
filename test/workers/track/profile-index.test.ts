import { describe, expect, it } from 'vitest'
import type { ProfileRow } from '../../../shared/db/repositories/profile-repository.js'
import { storedProfile } from '../../helpers/stored-profile.js'
import type { ProfileParts } from '../../../shared/domain/user-record.js'
import { ProfileIndex, profilesToRead } from '../../../workers/track/profile-index.js'

const WS = 'ws-1'
const NOW = '2026-05-01T00:00:00.000Z'

const profile = (id: number, fields: Partial<ProfileRow> = {}) => storedProfile(id, fields, WS)

const noParts = (): ProfileParts => ({ aliases: [], tokens: [], subscriptions: [] })

/** An index over three stored profiles: two share an email and a phone; profile 2 was updated last. */
function storedIndex(idPool = [100, 101, 102]) {
  const ann = profile(1, { external_id: 'ann', email: 'shared@example.com', phone: '+4712345678', updated_at: '2026-02-01T00:00:00.000Z' })
  const bob = profile(2, { external_id: 'bob', email: 'shared@example.com', phone: '+4712345678', updated_at: '2026-03-01T00:00:00.000Z' })
  const cid = profile(3, { email: 'cid@example.com', updated_at: '2026-01-15T00:00:00.000Z' })
  const index = new ProfileIndex(
    {
      keys: [bob, ann, cid],
      aliasOwner: new Map(),
      records: [
        { profile: bob, parts: noParts() },
        { profile: ann, parts: { ...noParts(), aliases: [{ alias_label: 'crm', alias_name: 'a-1' }] } },
        { profile: cid, parts: noParts() },
      ],
    },
    WS,
    idPool,
    NOW,
  )
  return { index, ann, bob, cid }
}

describe('ProfileIndex look-ups', () => {
  it('finds a stored profile by each kind of identifier', () => {
    const { index, ann, cid } = storedIndex()
    expect(index.find({ kind: 'external_id', value: 'ann' })).toBe(ann)
    expect(index.find({ kind: 'service_id', value: 'svc-3' })).toBe(cid)
    expect(index.find({ kind: 'email', value: 'cid@example.com' })).toBe(cid)
    expect(index.find({ kind: 'user_alias', alias_label: 'crm', alias_name: 'a-1' })).toBe(ann)
    expect(index.get(3)).toBe(cid)
  })

  it('finds nobody for identifiers no profile has, nor for a label or name alone', () => {
    const { index } = storedIndex()
    expect(index.find({ kind: 'external_id', value: 'nobody' })).toBeUndefined()
    expect(index.find({ kind: 'service_id', value: 'svc-9' })).toBeUndefined()
    expect(index.find({ kind: 'email', value: 'nobody@example.com' })).toBeUndefined()
    expect(index.find({ kind: 'phone', value: '+4700000000' })).toBeUndefined()
    expect(index.find({ kind: 'user_alias', alias_label: 'crm', alias_name: 'a-2' })).toBeUndefined()
    expect(index.find({ kind: 'user_alias', alias_label: 'a-1', alias_name: 'crm' })).toBeUndefined()
    expect(index.find({ kind: 'external_id', value: 'svc-1' })).toBeUndefined()
    expect(index.get(99)).toBeUndefined()
  })

  it('answers the most recently updated profile for a shared email or phone, and a profile the batch touches becomes the most recent', () => {
    const { index, ann, bob } = storedIndex()
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(bob)
    expect(index.find({ kind: 'phone', value: '+4712345678' })).toBe(bob)
    index.touch(ann)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(ann)
    expect(index.find({ kind: 'phone', value: '+4712345678' })).toBe(ann)
  })

  it('ranks the holders of a shared address by the times of their keys, whatever order they were read in', () => {
    const at = (month: number) => `2026-0${month}-01T00:00:00.000Z`
    const holders = [
      profile(11, { email: 'team@example.com', phone: '+4790000001', updated_at: at(5) }),
      profile(12, { email: 'team@example.com', updated_at: at(2) }),
      profile(13, { email: 'team@example.com', phone: '+4790000001', updated_at: at(3) }),
      profile(14, { phone: '+4790000001', updated_at: at(4) }),
      // Alone at its address: updated last of all, it is compared with nobody.
      profile(15, { email: 'solo@example.com', updated_at: at(9) }),
    ]
    // The keys of 12 carry a later occurrence than its row's update (withLastOccurrences): the keys decide.
    const keys = [holders[4], holders[0], holders[3], { ...holders[1], updated_at: at(7) }, holders[2]]
    const index = new ProfileIndex({ keys, aliasOwner: new Map(), records: holders.map((profile) => ({ profile, parts: noParts() })) }, WS, [], NOW)
    expect(index.find({ kind: 'email', value: 'team@example.com' })?.id).toBe(12)
    expect(index.find({ kind: 'phone', value: '+4790000001' })?.id).toBe(11)
    expect(index.find({ kind: 'email', value: 'solo@example.com' })?.id).toBe(15)
    index.addOccurrence(holders[2])
    expect(index.find({ kind: 'email', value: 'team@example.com' })?.id).toBe(13)
    expect(index.find({ kind: 'phone', value: '+4790000001' })?.id).toBe(13)
  })
})

describe('ProfileIndex changes', () => {
  it('creates a profile from the id pool, found by the identifier it was created for and by its service id', () => {
    const { index } = storedIndex()
    const byEmail = index.create({ kind: 'email', value: 'new@example.com' })
    const byExternal = index.create({ kind: 'external_id', value: 'carl' })
    expect([byEmail.id, byExternal.id]).toEqual([100, 101])
    expect(byEmail).toMatchObject({ workspace_id: WS, email: 'new@example.com', external_id: null, phone: null, created_at: NOW, updated_at: NOW, version: 1 })
    expect(byEmail.service_id).toMatch(/^[0-9a-f]{24}$/)
    expect(byEmail.service_id).not.toBe(byExternal.service_id)
    // Led by the creation second (big-endian), so new ids append to the unique index.
    const second = Math.floor(Date.now() / 1000)
    expect(parseInt(byEmail.service_id.slice(0, 8), 16)).toBeGreaterThanOrEqual(second - 1)
    expect(parseInt(byEmail.service_id.slice(0, 8), 16)).toBeLessThanOrEqual(second)
    expect(byEmail.random_bucket).toBeGreaterThanOrEqual(0)
    expect(byEmail.random_bucket).toBeLessThan(10_000)
    expect(index.find({ kind: 'email', value: 'new@example.com' })).toBe(byEmail)
    expect(index.find({ kind: 'external_id', value: 'carl' })).toBe(byExternal)
    expect(index.find({ kind: 'service_id', value: byExternal.service_id })).toBe(byExternal)
    // A new address holder: states stored for the address apply to it; an external id is no address.
    expect(index.addressChanged.has(byEmail.id)).toBe(true)
    expect(index.addressChanged.has(byExternal.id)).toBe(false)
  })

  it('creates a profile for an alias, recording the alias as new, and an anonymous one for a push import', () => {
    const { index } = storedIndex()
    const aliased = index.create({ kind: 'user_alias', alias_label: 'crm', alias_name: 'z-9' })
    expect(index.find({ kind: 'user_alias', alias_label: 'crm', alias_name: 'z-9' })).toBe(aliased)
    expect(index.newAliases).toEqual([{ alias_label: 'crm', alias_name: 'z-9', profile_id: aliased.id }])
    expect(index.recordOf(aliased.id).record.user_aliases).toEqual([{ alias_name: 'z-9', alias_label: 'crm' }])
    const anonymous = index.create(undefined, { anonymous: true })
    expect(anonymous).toMatchObject({ external_id: null, email: null, phone: null, push_import_anonymous: true })
  })

  it('refuses to create a profile once the id pool is used up', () => {
    const { index } = storedIndex([100])
    index.create({ kind: 'external_id', value: 'one' })
    expect(() => index.create({ kind: 'external_id', value: 'two' })).toThrow('profile id pool exhausted')
  })

  it('moves a profile between addresses, so the old one finds it no more', () => {
    const { index, ann, bob } = storedIndex()
    index.setAddress(bob, 'email', 'bob@example.com')
    expect(bob.email).toBe('bob@example.com')
    expect(index.find({ kind: 'email', value: 'bob@example.com' })).toBe(bob)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(ann)
    index.setAddress(ann, 'phone', null)
    expect(ann.phone).toBeNull()
    expect(index.find({ kind: 'phone', value: '+4712345678' })).toBe(bob)
    expect([...index.addressChanged].sort()).toEqual([1, 2])
  })

  it('finds by service id a profile created after an earlier look-up by service id', () => {
    const { index, cid } = storedIndex()
    expect(index.find({ kind: 'service_id', value: 'svc-3' })).toBe(cid)
    const created = index.create({ kind: 'external_id', value: 'dan' })
    expect(index.find({ kind: 'service_id', value: created.service_id })).toBe(created)
  })

  it('keeps an address found through its holders leaving, coming back and sharing it anew', () => {
    const { index, ann, bob, cid } = storedIndex()
    index.setAddress(ann, 'email', null)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(bob)
    index.setAddress(bob, 'email', null)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBeUndefined()
    // cid takes the address, then ann comes back to it: the one touched last is the most recent.
    index.setAddress(cid, 'email', 'shared@example.com')
    index.touch(cid)
    index.setAddress(ann, 'email', 'shared@example.com')
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(cid)
    index.touch(ann)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(ann)
    expect(index.find({ kind: 'email', value: 'cid@example.com' })).toBeUndefined()
  })

  it('records no address change when the address is set to what it already is', () => {
    const { index, cid } = storedIndex()
    index.setAddress(cid, 'email', 'cid@example.com')
    expect(index.addressChanged.size).toBe(0)
  })

  it('adds aliases in byte order to the record', () => {
    const { index, ann } = storedIndex()
    index.addAlias(ann.id, 'app', 'b')
    index.addAlias(ann.id, 'Zed', 'x')
    expect(index.find({ kind: 'user_alias', alias_label: 'Zed', alias_name: 'x' })).toBe(ann)
    expect(index.recordOf(ann.id).record.user_aliases).toEqual([
      { alias_name: 'x', alias_label: 'Zed' },
      { alias_name: 'b', alias_label: 'app' },
      { alias_name: 'a-1', alias_label: 'crm' },
    ])
  })

  it('makes a profile that gets an event the most recently updated, leaving its stored record as it was', () => {
    const { index, ann, bob } = storedIndex()
    const before = index.recordOf(ann.id).record
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(bob)
    index.addOccurrence(ann)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(ann)
    expect(index.recordOf(ann.id).record).toEqual(before)
    expect(before).not.toHaveProperty('custom_events')
  })

  it('saves the created profiles and the stored ones it changed, each at the version its save gives it', () => {
    const { index, ann, bob, cid } = storedIndex()
    const created = index.create({ kind: 'external_id', value: 'dan' })
    index.touch(created)
    index.addOccurrence(created)
    index.addOccurrence(cid)
    index.touch(cid, ['home_city'])
    index.touch(cid, ['first_name', 'home_city'])
    index.touch(ann)
    // Bob only got an event: his row is not written (the summary row carries the time), nor is his snapshot.
    index.addOccurrence(bob)
    expect(index.rowsToSave()).toEqual({
      created: [created],
      changed: [
        { columns: ['first_name', 'home_city'], rows: [cid] },
        { columns: [], rows: [ann] },
      ],
    })
    expect(index.touchedIds()).toEqual([created.id, cid.id, ann.id])
    expect(index.recordOf(created.id).version).toBe(1)
    expect(index.recordOf(cid.id).version).toBe(4)
    expect(index.recordOf(ann.id).randomBucket).toBe(7)
  })
})

describe('profiles held by their keys', () => {
  const keysOf = (p: ProfileRow) => ({ id: p.id, external_id: p.external_id, service_id: p.service_id, email: p.email, phone: p.phone, updated_at: p.updated_at, version: p.version })
  const ann = profile(1, { external_id: 'ann', email: 'shared@example.com', updated_at: '2026-02-01T00:00:00.000Z' })
  const bob = profile(2, { external_id: 'bob', email: 'shared@example.com', updated_at: '2026-03-01T00:00:00.000Z' })
  const cid = profile(3, { phone: '+4712345678', updated_at: '2026-01-15T00:00:00.000Z' })
  const dee = profile(4, { external_id: 'dee', updated_at: '2026-01-15T00:00:00.000Z' })
  const keys = [ann, bob, cid, dee].map(keysOf)
  const aliasOwner = new Map([['crm\u001fd-1', 4]])

  it('reads the fields of every profile an attributes object names, every holder of a shared address included', () => {
    expect(profilesToRead(keys, aliasOwner, [{ kind: 'email', value: 'shared@example.com' }]).sort()).toEqual([1, 2])
    expect(profilesToRead(keys, aliasOwner, [{ kind: 'phone', value: '+4712345678' }])).toEqual([3])
    expect(profilesToRead(keys, aliasOwner, [{ kind: 'user_alias', alias_label: 'crm', alias_name: 'd-1' }])).toEqual([4])
    expect(profilesToRead(keys, aliasOwner, [{ kind: 'service_id', value: 'svc-2' }, { kind: 'external_id', value: 'nobody' }])).toEqual([2])
    expect(profilesToRead(keys, aliasOwner, [])).toEqual([])
  })

  it('finds a profile held by its keys and counts its events, but refuses to change its fields', () => {
    const index = new ProfileIndex({ keys, aliasOwner, records: [{ profile: ann, parts: noParts() }] }, WS, [], NOW)
    const byAlias = index.find({ kind: 'user_alias', alias_label: 'crm', alias_name: 'd-1' })!
    expect(byAlias).toEqual(keysOf(dee))
    expect(index.get(4)).toBeUndefined()
    expect(() => index.fieldsOf(byAlias)).toThrow(/read without its fields/)
    expect(index.fieldsOf(index.find({ kind: 'external_id', value: 'ann' })!)).toBe(ann)
    // Bob (keys only) was updated last; an event makes Ann the most recent, and her fields are held.
    expect(index.find({ kind: 'email', value: 'shared@example.com' })!.id).toBe(2)
    index.addOccurrence(index.find({ kind: 'external_id', value: 'ann' })!)
    expect(index.find({ kind: 'email', value: 'shared@example.com' })).toBe(ann)
    index.addOccurrence(byAlias)
    expect(index.rowsToSave()).toEqual({ created: [], changed: [] })
  })
})
