import { describe, expect, it } from 'vitest'
import type { ProfileRow } from '../../../shared/db/repositories/profile-repository.js'
import { storedProfile } from '../../helpers/stored-profile.js'
import type { AttributeOp, EventOp, PurchaseOp } from '../../../shared/domain/track-operations.js'
import type { TrackJob } from '../../../shared/queue/track-jobs.js'
import {
  applyAttributes,
  applyJobs,
  importPushTokens,
  newTrackBatch,
  resolveProfile,
  type TrackApplyError,
  type TrackBatch,
} from '../../../workers/track/apply-objects.js'
import { ProfileIndex } from '../../../workers/track/profile-index.js'

const WS = 'ws-1'
const NOW = '2026-05-01T00:00:00.000Z'

const profile = (id: number, fields: Partial<ProfileRow> = {}) => storedProfile(id, fields, WS)

/** A batch over stored profiles `ann` (id 1, with an email and a token) and `bob` (id 2), group `g-1` existing. */
function batchOf(opts: { idPool?: number[] } = {}): { batch: TrackBatch; ann: ProfileRow; bob: ProfileRow } {
  const ann = profile(1, { external_id: 'ann', email: 'ann@example.com', custom_attributes: { visits: 2 } })
  const bob = profile(2, { external_id: 'bob' })
  const parts = () => ({ aliases: [], tokens: [], subscriptions: [] })
  const index = new ProfileIndex(
    {
      keys: [ann, bob],
      aliasOwner: new Map(),
      records: [
        { profile: ann, parts: parts() },
        { profile: bob, parts: parts() },
      ],
    },
    WS,
    opts.idPool ?? [100, 101, 102],
    NOW,
  )
  const tokens = [{ workspace_id: WS, app_id: 'app', token: 'tok-ann', profile_id: 1, device_id: null }]
  return { batch: newTrackBatch(index, tokens as never, ['g-1'], NOW), ann, bob }
}

const attributes = (op: Partial<AttributeOp>): AttributeOp => ({
  index: 0,
  pushTokenImport: false,
  fields: {},
  custom: {},
  pushTokens: [],
  subscriptionGroups: [],
  ...op,
})

const event = (index: number, identifier: EventOp['identifier'], name: string, time: string, more: Partial<EventOp> = {}): EventOp => ({ index, identifier, name, time, properties: {}, ...more })

const purchase = (index: number, identifier: PurchaseOp['identifier'], more: Partial<PurchaseOp> = {}): PurchaseOp => ({
  index,
  identifier,
  product_id: 'sku',
  currency: 'USD',
  price: 1,
  quantity: 1,
  time: NOW,
  properties: '{}',
  ...more,
})

const trackJob = (job: Partial<TrackJob>): TrackJob => ({
  workspaceId: WS,
  requestId: 'r',
  attributes: [],
  events: [],
  purchases: [],
  subscriptionChanges: [],
  emailStateChanges: [],
  ...job,
})

describe('resolving the profile an object names', () => {
  it('finds a stored profile, creates one for a new external id, and refuses an alias nobody has unless told to create', () => {
    const { batch, ann } = batchOf()
    const errors: TrackApplyError[] = []
    expect(resolveProfile(batch, { identifier: { kind: 'external_id', value: 'ann' }, at: { input_array: 'events', index: 0 } }, errors)).toBe(ann)
    expect(resolveProfile(batch, { identifier: { kind: 'external_id', value: 'new' }, at: { input_array: 'events', index: 1 } }, errors)).toMatchObject({ id: 100, external_id: 'new' })
    const alias = { kind: 'user_alias', alias_label: 'crm', alias_name: 'x' } as const
    expect(resolveProfile(batch, { identifier: alias, at: { input_array: 'attributes', index: 2 } }, errors)).toBeUndefined()
    expect(resolveProfile(batch, { identifier: alias, updateExistingOnly: false, at: { input_array: 'attributes', index: 3 } }, errors)).toMatchObject({ id: 101 })
    expect(errors).toEqual([{ type: 'user_not_found', input_array: 'attributes', index: 2, message: expect.stringContaining('x') }])
  })

  it('never creates a profile for an unknown service id or when only existing users may be updated', () => {
    const { batch } = batchOf()
    const errors: TrackApplyError[] = []
    expect(resolveProfile(batch, { identifier: { kind: 'service_id', value: 'nope' }, updateExistingOnly: false, at: { input_array: 'purchases', index: 4 } }, errors)).toBeUndefined()
    expect(resolveProfile(batch, { identifier: { kind: 'external_id', value: 'new' }, updateExistingOnly: true, at: { input_array: 'attributes', index: 5 } }, errors)).toBeUndefined()
    expect(errors.map((e) => [e.type, e.input_array, e.index])).toEqual([
      ['user_not_found', 'purchases', 4],
      ['user_not_found', 'attributes', 5],
    ])
    expect(batch.profiles.created.size).toBe(0)
  })
})

describe('applying an attributes object in memory', () => {
  it('sets standard fields, applies custom operations, and finds the profile by the email it was just given', () => {
    const { batch, bob } = batchOf()
    const errors: TrackApplyError[] = []
    applyAttributes(batch, bob, attributes({ fields: { first_name: 'Bob', email: 'bob@example.com' }, custom: { visits: { inc: 3 }, tags: { add: ['a'] } } }), errors)
    expect(bob).toMatchObject({ first_name: 'Bob', email: 'bob@example.com', custom_attributes: { visits: 3, tags: ['a'] } })
    expect(batch.profiles.find({ kind: 'email', value: 'bob@example.com' })).toBe(bob)
    expect(batch.profiles.addressChanged.has(bob.id)).toBe(true)
    // Only the columns the object set are rewritten.
    expect(batch.profiles.rowsToSave().changed).toEqual([{ columns: ['first_name', 'email', 'custom_attributes'], rows: [bob] }])
    expect(errors).toEqual([])
  })

  it('stamps push_opted_in_at only when push_subscribe becomes opted_in', () => {
    const { batch, bob } = batchOf()
    applyAttributes(batch, bob, attributes({ fields: { push_subscribe: 'opted_in' } }), [])
    expect(bob.push_opted_in_at).toBe(NOW)
    bob.push_opted_in_at = 'earlier'
    applyAttributes(batch, bob, attributes({ fields: { push_subscribe: 'opted_in' } }), [])
    expect(bob.push_opted_in_at).toBe('earlier')
  })

  it('moves a push token off its former owner, and records a known group while refusing an unknown one', () => {
    const { batch, bob } = batchOf()
    const errors: TrackApplyError[] = []
    applyAttributes(
      batch,
      bob,
      attributes({
        index: 7,
        pushTokens: [{ app_id: 'app', token: 'tok-ann' }],
        subscriptionGroups: [
          { subscription_group_id: 'g-1', subscription_state: 'subscribed' },
          { subscription_group_id: 'g-gone', subscription_state: 'subscribed' },
        ],
      }),
      errors,
    )
    expect([...batch.tokenWrites.values()]).toEqual([{ app_id: 'app', token: 'tok-ann', profile_id: 2, device_id: null }])
    expect([...batch.formerTokenOwners]).toEqual([1])
    expect(batch.subscriptions).toEqual([{ profile_id: 2, group_id: 'g-1', state: 'subscribed' }])
    expect(errors).toEqual([{ type: 'unknown_subscription_group', input_array: 'attributes', index: 7, message: 'unknown subscription_group_id g-gone' }])
  })

  it('rewrites push_opted_in_at with push_subscribe, and no column for a push token alone', () => {
    const { batch, ann, bob } = batchOf()
    applyAttributes(batch, ann, attributes({ fields: { push_subscribe: 'opted_in' } }), [])
    applyAttributes(batch, bob, attributes({ pushTokens: [{ app_id: 'app', token: 'tok-bob' }] }), [])
    expect(ann.push_opted_in_at).toBe(NOW)
    expect(batch.profiles.rowsToSave().changed).toEqual([
      { columns: ['push_subscribe', 'push_opted_in_at'], rows: [ann] },
      { columns: [], rows: [bob] },
    ])
  })

  it('passes a subscription change of a user with an email on to the users sharing it', () => {
    const { batch, ann } = batchOf()
    applyAttributes(batch, ann, attributes({ fields: { email_subscribe: 'unsubscribed' }, subscriptionGroups: [{ subscription_group_id: 'g-1', subscription_state: 'unsubscribed' }] }), [])
    expect(batch.explicitEmailSubscribe.get(1)).toBe('unsubscribed')
    expect(batch.sharedEmailChanges).toEqual([
      { email: 'ann@example.com', groups: [{ profile_id: 1, group_id: 'g-1', state: 'unsubscribed' }], emailSubscribe: 'unsubscribed', source: 1 },
    ])
  })

  it('sets the reference\'s other standard fields, whatever their type, and rewrites their columns', () => {
    const { batch, bob } = batchOf()
    applyAttributes(batch, bob, attributes({ fields: { last_coordinates: [-73.99, 40.75], email_open_tracking_disabled: true, facebook: { id: 'f' } } }), [])
    expect(bob).toMatchObject({ last_coordinates: [-73.99, 40.75], email_open_tracking_disabled: true, facebook: { id: 'f' } })
    expect(batch.profiles.rowsToSave().changed).toEqual([{ columns: ['last_coordinates', 'email_open_tracking_disabled', 'facebook'], rows: [bob] }])
  })

  it('edits arrays of objects in place, merges objects with _merge_objects, and reports what it could not do as errors of the object', () => {
    const { batch, ann } = batchOf()
    ann.custom_attributes = { visits: 2, pets: [{ id: 1, name: 'Gus', vet: { name: 'Ada' } }, { id: 2, name: 'Gerald' }], song: { name: 'Solea', plays: 3 } }
    const errors: TrackApplyError[] = []
    applyAttributes(
      batch,
      ann,
      attributes({
        index: 5,
        mergeObjects: true,
        custom: {
          pets: {
            $update: [
              { $identifier_key: 'id', $identifier_value: 1, $new_object: { vet: { phone: '1' } } },
              { $identifier_key: 'id', $identifier_value: 7, $new_object: { name: 'x' } },
            ],
            $remove: [{ $identifier_key: 'id', $identifier_value: 2 }],
            $add: [{ id: 3, name: 'Doug' }],
          },
          song: { year: 1960 },
        },
      }),
      errors,
    )
    expect(ann.custom_attributes).toEqual({
      visits: 2,
      pets: [{ id: 1, name: 'Gus', vet: { name: 'Ada', phone: '1' } }, { id: 3, name: 'Doug' }],
      song: { name: 'Solea', plays: 3, year: 1960 },
    })
    expect(errors).toEqual([{ type: 'nested_item_not_found', input_array: 'attributes', index: 5, message: 'pets: $update found no item with id 7' }])
    // Without _merge_objects the object replaces the one stored.
    applyAttributes(batch, ann, attributes({ custom: { song: { year: 1961 } } }), errors)
    expect(ann.custom_attributes.song).toEqual({ year: 1961 })
  })

  it('imports a push token nobody holds as an anonymous profile, and skips one already held', () => {
    const { batch } = batchOf()
    importPushTokens(batch, attributes({ pushTokenImport: true, pushTokens: [{ app_id: 'app', token: 'tok-ann' }, { app_id: 'app', token: 'tok-new' }] }), [])
    expect([...batch.profiles.created.values()].map((p) => [p.id, p.push_import_anonymous])).toEqual([[100, true]])
    expect(batch.tokenWrites.get('app\u0000tok-new')?.profile_id).toBe(100)
  })
})

describe('recording events and purchases', () => {
  it('writes no row for an occurrence, yet makes its profile the most recently updated of those sharing its email', () => {
    const older = profile(3, { external_id: 'cy', email: 'shared@example.com', updated_at: '2026-01-01T00:00:00.000Z' })
    const newer = profile(4, { external_id: 'di', email: 'shared@example.com', updated_at: '2026-02-01T00:00:00.000Z' })
    const parts = () => ({ aliases: [], tokens: [], subscriptions: [] })
    const index = new ProfileIndex({ keys: [older, newer], aliasOwner: new Map(), records: [{ profile: older, parts: parts() }, { profile: newer, parts: parts() }] }, WS, [], NOW)
    const batch = newTrackBatch(index, [], [], NOW)
    const byEmail = { kind: 'email', value: 'shared@example.com' } as const
    expect(batch.profiles.find(byEmail)?.id).toBe(4)

    const { owners } = applyJobs(batch, [
      { key: 'j1', job: trackJob({ events: [event(0, { kind: 'external_id', value: 'cy' }, 'open', NOW)] }) },
      { key: 'j2', job: trackJob({ attributes: [attributes({ identifier: byEmail, fields: { first_name: 'Cy' } })] }) },
    ])
    expect(owners.get('j1')).toEqual([3])
    // The event's profile is the one the email names next; only the attributes object wrote a row.
    expect(batch.profiles.get(3)).toMatchObject({ first_name: 'Cy' })
    expect(batch.profiles.get(4)).toMatchObject({ first_name: null })
    expect(batch.profiles.rowsToSave().changed.flatMap((g) => g.rows.map((r) => r.id))).toEqual([3])
  })
})

describe('an occurrence\'s _update_existing_only', () => {
  const unknown = { kind: 'external_id', value: 'nobody-yet' } as const
  const alias = { kind: 'user_alias', alias_label: 'crm', alias_name: 'a-1' } as const

  it('true: skips an occurrence of an unknown user, creating nobody, and applies one of a known user', () => {
    const { batch } = batchOf()
    const job = trackJob({
      events: [event(0, unknown, 'open', NOW, { _update_existing_only: true }), event(1, { kind: 'external_id', value: 'bob' }, 'open', NOW, { _update_existing_only: true })],
      purchases: [purchase(0, unknown, { _update_existing_only: true }), purchase(1, { kind: 'email', value: 'ann@example.com' }, { _update_existing_only: true })],
    })
    const { owners, errors } = applyJobs(batch, [{ key: 'j1', job }])
    expect(owners.get('j1')).toEqual([null, 2, null, 1])
    expect(errors.get('j1')!.map((e) => [e.type, e.input_array, e.index])).toEqual([
      ['user_not_found', 'events', 0],
      ['user_not_found', 'purchases', 0],
    ])
    expect(batch.profiles.created.size).toBe(0)
  })

  it('true: applies to a user an earlier attributes object of the request created', () => {
    const { batch } = batchOf()
    const job = trackJob({ attributes: [attributes({ identifier: unknown, fields: { first_name: 'N' } })], events: [event(0, unknown, 'open', NOW, { _update_existing_only: true })] })
    expect(applyJobs(batch, [{ key: 'j1', job }]).owners.get('j1')).toEqual([100])
  })

  it('absent: creates a user named by external id as before; false: creates an alias-only user too', () => {
    const { batch } = batchOf()
    const job = trackJob({ events: [event(0, unknown, 'open', NOW), event(1, alias, 'open', NOW, { _update_existing_only: false }), event(2, { ...alias, alias_name: 'a-2' }, 'open', NOW)] })
    const { owners, errors } = applyJobs(batch, [{ key: 'j1', job }])
    expect(owners.get('j1')).toEqual([100, 101, null])
    expect(errors.get('j1')!.map((e) => [e.type, e.index])).toEqual([['user_not_found', 2]])
    expect(batch.profiles.newAliases).toEqual([{ alias_label: 'crm', alias_name: 'a-1', profile_id: 101 }])
  })
})

describe('applying jobs in order', () => {
  it('refuses a job with an occurrence time the API does not write, before applying any of it', () => {
    const { batch } = batchOf()
    const job = trackJob({ attributes: [attributes({ identifier: { kind: 'external_id', value: 'bob' }, fields: { first_name: 'Bo' } })], events: [event(0, { kind: 'external_id', value: 'bob' }, 'open', 'not a time')] })
    expect(() => applyJobs(batch, [{ key: 'j1', job }])).toThrow(/events\[0\]\.time "not a time"/)
    expect(batch.profiles.rowsToSave()).toEqual({ created: [], changed: [] })
  })

  it('applies each job’s attributes before its events, lets a later job see an earlier one’s profile, and names each occurrence’s owner', () => {
    const { batch } = batchOf()
    const alias = { kind: 'user_alias', alias_label: 'crm', alias_name: 'c-1' } as const
    const jobs = [
      {
        key: 'j1',
        job: trackJob({
          attributes: [attributes({ identifier: alias, updateExistingOnly: false, fields: { first_name: 'Cy' } })],
          events: [event(0, alias, 'open', '2026-04-01T00:00:00.000Z'), event(1, { kind: 'user_alias', alias_label: 'crm', alias_name: 'nobody' }, 'open', NOW)],
        }),
      },
      { key: 'j2', job: trackJob({ events: [event(0, alias, 'open', '2026-04-02T00:00:00.000Z'), event(1, { kind: 'external_id', value: 'bob' }, 'open', NOW)] }) },
    ]
    const { owners, errors } = applyJobs(batch, jobs)
    expect(owners).toEqual(
      new Map([
        ['j1', [100, null]],
        ['j2', [100, 2]],
      ]),
    )
    expect(errors.get('j1')!.map((e) => [e.type, e.input_array, e.index])).toEqual([['user_not_found', 'events', 1]])
    expect(errors.get('j2')).toEqual([])
    expect(batch.profiles.get(100)).toMatchObject({ first_name: 'Cy' })
    expect(batch.profiles.newAliases).toEqual([{ alias_label: 'crm', alias_name: 'c-1', profile_id: 100 }])
  })
})
