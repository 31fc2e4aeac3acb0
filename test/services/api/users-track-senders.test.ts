import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countEvents } from '../../../shared/clickhouse/event-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

// What real senders send to /users/track (the reference's request shapes, and those of a CDP's
// destination for it), through HTTP, the queue and the worker, read back with /users/export/ids.

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

const trackAndWait = (body: unknown, key = ws.key) => env.writeAndWait(key, '/users/track', body)
const userOf = async (externalId: string, key = ws.key) => (await env.readUsers(key, { external_ids: [externalId] })).users[0]
const byId = (id: number) => ({ $identifier_key: 'id', $identifier_value: id })

describe('nested custom attributes', () => {
  it('changes an array of objects item by item with $add, $update and $remove', async () => {
    await trackAndWait({
      attributes: [
        {
          external_id: 'pets-1',
          pets: [
            { id: 1, type: 'dog', breed: 'beagle', name: 'Gus' },
            { id: 2, type: 'cat', breed: 'calico', name: 'Gerald' },
          ],
        },
      ],
    })
    const add = await trackAndWait({
      attributes: [{ external_id: 'pets-1', pets: { $add: [{ id: 4, type: 'fish', breed: 'salmon', name: 'Larry' }, { id: 5, type: 'bird', breed: 'parakeet', name: 'Mary' }] } }],
    })
    expect(add.response).toEqual({ message: 'success', attributes_processed: 1 })
    await trackAndWait({
      attributes: [
        {
          external_id: 'pets-1',
          _merge_objects: true,
          pets: { $update: [{ ...byId(4), $new_object: { breed: 'goldfish' } }, { ...byId(5), $new_object: { name: 'Annette' } }] },
        },
      ],
    })
    expect((await userOf('pets-1')).custom_attributes).toEqual({
      pets: [
        { id: 1, type: 'dog', breed: 'beagle', name: 'Gus' },
        { id: 2, type: 'cat', breed: 'calico', name: 'Gerald' },
        { id: 4, type: 'fish', breed: 'goldfish', name: 'Larry' },
        { id: 5, type: 'bird', breed: 'parakeet', name: 'Annette' },
      ],
    })
    // A real client's "remove one item": the others stay.
    const remove = await trackAndWait({ attributes: [{ external_id: 'pets-1', pets: { $remove: [byId(1), { $identifier_key: 'type', $identifier_value: 'bird' }] } }] })
    expect(remove.response).toEqual({ message: 'success', attributes_processed: 1 })
    const pets = (await userOf('pets-1')).custom_attributes.pets
    expect(pets).toEqual([
      { id: 2, type: 'cat', breed: 'calico', name: 'Gerald' },
      { id: 4, type: 'fish', breed: 'goldfish', name: 'Larry' },
    ])
  })

  it('replaces the item $update finds without _merge_objects, and reports in the progress an item it did not find', async () => {
    await trackAndWait({ attributes: [{ external_id: 'pets-2', pets: [{ id: 1, name: 'Gus', breed: 'beagle' }] }] })
    const { progress } = await trackAndWait({
      attributes: [{ external_id: 'pets-2', pets: { $update: [{ ...byId(1), $new_object: { id: 1, name: 'Gus II' } }, { ...byId(9), $new_object: { name: 'x' } }] } }],
    })
    expect(progress.errors).toEqual([{ type: 'nested_item_not_found', input_array: 'attributes', index: 0, message: 'pets: $update found no item with id 9' }])
    expect((await userOf('pets-2')).custom_attributes).toEqual({ pets: [{ id: 1, name: 'Gus II' }] })
  })

  it('deep-merges an object with _merge_objects, which is no custom attribute, and replaces it without', async () => {
    await trackAndWait({
      attributes: [{ external_id: 'song-1', most_played_song: { song_name: 'Solea', artist_name: 'Miles Davis', play_analytics: { count: 1000, top_10_listeners: true } } }],
    })
    await trackAndWait({ attributes: [{ external_id: 'song-1', _merge_objects: true, most_played_song: { year_released: 1960, play_analytics: { count: 1001 } } }] })
    expect((await userOf('song-1')).custom_attributes).toEqual({
      most_played_song: { song_name: 'Solea', artist_name: 'Miles Davis', year_released: 1960, play_analytics: { count: 1001, top_10_listeners: true } },
    })
    await trackAndWait({ attributes: [{ external_id: 'song-1', most_played_song: { song_name: 'So What' } }] })
    expect((await userOf('song-1')).custom_attributes).toEqual({ most_played_song: { song_name: 'So What' } })
  })

  it('refuses a nested value over 100 KB alone, non-fatally, applying the rest of the object', async () => {
    const blob = 'x'.repeat(100 * 1024)
    const { response } = await trackAndWait({ attributes: [{ external_id: 'big-1', first_name: 'Big', plan: 'gold', stays: [{ hotel: 'Ritz', notes: blob }] }] })
    expect(response).toEqual({
      message: 'success',
      attributes_processed: 1,
      errors: [
        {
          type: 'invalid_field',
          input_array: 'attributes',
          index: 0,
          message: 'attributes[0].stays: is larger than 100 KB (102400 bytes of JSON), the limit of a nested value; not stored',
        },
      ],
    })
    const u = await userOf('big-1')
    expect(u.first_name).toBe('Big')
    expect(u.custom_attributes).toEqual({ plan: 'gold' })
  })

  it('leaves an array unchanged, reporting it in the progress, when $add would make it larger than the limit', async () => {
    const half = 'x'.repeat(60 * 1024)
    await trackAndWait({ attributes: [{ external_id: 'big-2', stays: [{ id: 1, notes: half }] }] })
    const { response, progress } = await trackAndWait({ attributes: [{ external_id: 'big-2', stays: { $add: [{ id: 2, notes: half }] }, visits: 1 }] })
    expect(response).toEqual({ message: 'success', attributes_processed: 1 })
    expect(progress.errors).toEqual([
      { type: 'nested_value_too_large', input_array: 'attributes', index: 0, message: 'stays: would be larger than 100 KB (102400 bytes of JSON); not applied, the attribute is unchanged' },
    ])
    expect((await userOf('big-2')).custom_attributes).toEqual({ stays: [{ id: 1, notes: half }], visits: 1 })
  })
})

describe('the reference\'s standard fields', () => {
  it('stores a country name as its code, and an ambiguous one as a non-fatal error of that field alone', async () => {
    await trackAndWait({ attributes: [{ external_id: 'c-1', country: 'United States' }] })
    expect((await userOf('c-1')).country).toBe('US')
    const { response } = await trackAndWait({ attributes: [{ external_id: 'c-1', country: 'Congo', home_city: 'Brazzaville', plan: 'gold' }] })
    expect(response).toEqual({
      message: 'success',
      attributes_processed: 1,
      errors: [
        {
          type: 'invalid_field',
          input_array: 'attributes',
          index: 0,
          message: 'attributes[0].country: names more than one country (CD, CG); send its ISO 3166-1 alpha-2 code. Not stored',
        },
      ],
    })
    expect(await userOf('c-1')).toMatchObject({ country: 'US', home_city: 'Brazzaville', custom_attributes: { plan: 'gold' } })
  })

  it('stores current_location as last_coordinates, image_url and the rest as fields, exported by name, none of them a custom attribute', async () => {
    await trackAndWait({
      attributes: [
        {
          external_id: 'f-1',
          current_location: { longitude: -73.991443, latitude: 40.753824 },
          image_url: 'https://cdn.example.com/ann.png',
          date_of_first_session: '2024-05-01T14:00:00+02:00',
          marked_email_as_spam_at: '2024-06-01',
          email_click_tracking_disabled: true,
          twitter: { id: 42, screen_name: 'ann', followers_count: 3 },
          plan: 'gold',
        },
      ],
    })
    const u = await userOf('f-1')
    expect(u).toMatchObject({
      last_coordinates: [-73.991443, 40.753824],
      image_url: 'https://cdn.example.com/ann.png',
      date_of_first_session: '2024-05-01T12:00:00.000Z',
      marked_email_as_spam_at: '2024-06-01T00:00:00.000Z',
      email_click_tracking_disabled: true,
      twitter: { id: 42, screen_name: 'ann', followers_count: 3 },
      custom_attributes: { plan: 'gold' },
    })
    // A flag not set is left out of the record, as false (interface.md 2.4).
    expect(u).not.toHaveProperty('email_open_tracking_disabled')
    const chosen = await env.readUsers(ws.key, { external_ids: ['f-1'], fields_to_export: ['image_url', 'last_coordinates'] })
    expect(chosen.users).toEqual([{ image_url: 'https://cdn.example.com/ann.png', last_coordinates: [-73.991443, 40.753824] }])
    // null clears each of them.
    await trackAndWait({ attributes: [{ external_id: 'f-1', current_location: null, image_url: null, email_click_tracking_disabled: null, twitter: null }] })
    const cleared = await userOf('f-1')
    for (const f of ['last_coordinates', 'image_url', 'email_click_tracking_disabled', 'twitter']) expect(cleared).not.toHaveProperty(f)
  })

  it('applies a CDP destination\'s identify whole: the request shape of Segment\'s Braze destination', async () => {
    // updateUserProfile's attributes object for a default identify (undefined members left out by JSON).
    const identify = {
      attributes: [
        {
          name: 'Ann Example',
          plan: 'pro',
          address: { city: 'New York', country: 'United States' },
          external_id: 'seg-1',
          country: 'United States',
          current_location: { latitude: 40.753824, longitude: -73.991443 },
          email: 'ann@example.com',
          first_name: 'Ann',
          gender: 'F',
          home_city: 'New York',
          image_url: 'https://cdn.example.com/ann.png',
          last_name: 'Example',
          _update_existing_only: false,
        },
      ],
    }
    const { response } = await trackAndWait(identify)
    expect(response).toEqual({ message: 'success', attributes_processed: 1 })
    expect(await userOf('seg-1')).toMatchObject({
      country: 'US',
      last_coordinates: [-73.991443, 40.753824],
      image_url: 'https://cdn.example.com/ann.png',
      email: 'ann@example.com',
      first_name: 'Ann',
      last_name: 'Example',
      gender: 'F',
      home_city: 'New York',
      custom_attributes: { name: 'Ann Example', plan: 'pro', address: { city: 'New York', country: 'United States' } },
    })
  })

  it('finds the user a braze_id names, as a service_id', async () => {
    const serviceId = (await userOf('seg-1')).service_id
    await trackAndWait({ attributes: [{ braze_id: serviceId, plan: 'enterprise' }] })
    expect((await userOf('seg-1')).custom_attributes.plan).toBe('enterprise')
  })
})

describe('_update_existing_only of events and purchases', () => {
  it('skips the occurrences of an unknown user, creating nobody and writing no event, and applies those of a known user', async () => {
    const own = await env.workspace()
    const time = new Date(Date.now() - 60_000).toISOString()
    await trackAndWait({ attributes: [{ external_id: 'known', first_name: 'K' }] }, own.key)
    const { response, progress } = await trackAndWait(
      {
        events: [
          { external_id: 'unknown', name: 'opened', time, _update_existing_only: true },
          { external_id: 'known', name: 'opened', time, _update_existing_only: true },
        ],
        purchases: [
          { external_id: 'unknown', product_id: 'sku', currency: 'USD', price: 1, time, _update_existing_only: true },
          { external_id: 'known', product_id: 'sku', currency: 'USD', price: 2, time, _update_existing_only: true },
        ],
      },
      own.key,
    )
    expect(response).toEqual({ message: 'success', events_processed: 2, purchases_processed: 2 })
    expect(progress.errors).toEqual([
      { type: 'user_not_found', input_array: 'events', index: 0, message: expect.stringContaining('unknown') },
      { type: 'user_not_found', input_array: 'purchases', index: 0, message: expect.stringContaining('unknown') },
    ])
    const read = await env.readUsers(own.key, { external_ids: ['unknown', 'known'] })
    expect(read.invalid_user_ids).toEqual(['unknown'])
    expect(read.users).toEqual([expect.objectContaining({ external_id: 'known', custom_events: [{ name: 'opened', first: time, last: time, count: 1 }], purchases: [{ name: 'sku', first: time, last: time, count: 1 }] })])
    expect(await countEvents(env.clickhouse, own.id)).toEqual([
      { kind: 'event', n: 1 },
      { kind: 'purchase', n: 1 },
    ])
    // Without the flag, an event still creates the user its external_id names.
    await trackAndWait({ events: [{ external_id: 'unknown', name: 'opened', time }] }, own.key)
    expect((await env.readUsers(own.key, { external_ids: ['unknown'] })).users).toHaveLength(1)
  })
})
