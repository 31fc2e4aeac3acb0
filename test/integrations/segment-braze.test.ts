import { createRequire } from 'node:module'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ModifiedResponse } from '@segment/actions-core'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

// Segment's Braze destination (npm @segment/action-destinations), its published code unchanged,
// run by actions-core's test integration against the service: every action that calls a
// user-data endpoint, by itself and batched, each effect read back. docs/compatibility.md lists
// the actions that call endpoints we do not have. The package's code is CommonJS and checks
// errors with instanceof, so actions-core is loaded through require too: one copy of it.
const require = createRequire(import.meta.url)
const core = require('@segment/actions-core') as typeof import('@segment/actions-core')
const braze = require('@segment/action-destinations/dist/destinations/braze').default
const { EVENT_NAMES } = require('@segment/action-destinations/dist/destinations/braze/ecommerce/constants')

let env: TestEnv
let ws: { id: string; key: string }
let settings: { api_key: string; endpoint: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity'] })
  ws = await env.workspace()
  settings = { api_key: ws.key, endpoint: env.baseUrl }
})
afterAll(async () => {
  await env.close()
})

/** What actions-core answers for a request it sent: the response, with the request and its options. */
type Response = ModifiedResponse<any> & { request: Request; options: { json?: any } }
interface Progress {
  status: string
  errors?: { type: string; index: number; message: string }[]
}

/** Waits until every request the destination sent is applied, and answers their progress. */
async function applied(responses: Response[]): Promise<Progress[]> {
  expect(responses.length).toBeGreaterThan(0)
  const progress: Progress[] = []
  for (const r of responses) {
    expect(r.status, JSON.stringify(r.data)).toBeLessThan(300)
    const p = await env.waitForRequest(ws.key, r.headers.get('x-request-id')!)
    expect(p.status).toBe('done')
    progress.push(p as Progress)
  }
  return progress
}

type TestEvent = Record<string, unknown>
interface ActionRun {
  responses: Response[]
  progress: Progress[]
  /** The request bodies the destination sent. */
  sent: any[]
}

/** One event through an action, with its default mappings and `mapping` over them, as a Segment user sets it up. */
async function perform(action: string, event: TestEvent, mapping: Record<string, unknown> = {}): Promise<ActionRun> {
  const dest = core.createTestIntegration(braze)
  const responses = (await dest.testAction(action, { event, settings, mapping: mapping as any, useDefaultMappings: true })) as Response[]
  return { responses, progress: await applied(responses), sent: responses.map((r) => r.options.json) }
}

/** Several events through an action's batch mode; answers the multistatus Segment reads too. */
async function performBatch(action: string, events: TestEvent[], mapping: Record<string, unknown> = {}): Promise<ActionRun & { statuses: any[] }> {
  const dest = core.createTestIntegration(braze)
  const responses = (await dest.testBatchAction(action, { events: events as any, settings, mapping: mapping as any, useDefaultMappings: true })) as Response[]
  const progress = await applied(responses)
  return { responses, progress, sent: responses.map((r) => r.options.json), statuses: (dest.results[0] as any).multistatus }
}

/** A Segment preset's mapping (what a user gets by default for those events). */
function preset(name: string): Record<string, unknown> {
  const p = braze.presets.find((x: { name: string }) => x.name === name)
  if (!p) throw new Error(`no preset ${name}`)
  return p.mapping
}

const user = async (externalId: string) => (await env.readUsers(ws.key, { external_ids: [externalId] })).users[0]
const byAlias = async (alias_name: string, alias_label: string) => (await env.readUsers(ws.key, { user_aliases: [{ alias_name, alias_label }] })).users[0]
const eventNames = (u: any) => (u.custom_events ?? []).map((e: any) => `${e.name}:${e.count}`).sort()

/** A user's events or purchases of one name, from the event history (the export shows summaries only). */
async function occurrences(serviceId: string, name: string): Promise<{ properties: any; price: number; quantity: number; currency: string }[]> {
  const db = env.clickhouse.database
  const rs = await env.clickhouse.client.query({
    query: `SELECT properties, price, quantity, currency FROM ${db}.events FINAL
      WHERE workspace_id = {ws:String} AND name = {name:String}
        AND profile_id IN (SELECT profile_id FROM ${db}.profile_snapshots FINAL WHERE workspace_id = {ws:String} AND JSONExtractString(record, 'service_id') = {sid:String})
      ORDER BY time, event_id`,
    query_params: { ws: ws.id, name, sid: serviceId },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ properties: string; price: number | string | null; quantity: number | string | null; currency: string | null }>()
  return rows.map((r) => ({ properties: JSON.parse(r.properties), price: Number(r.price), quantity: Number(r.quantity), currency: r.currency ?? '' }))
}
const eventProperties = async (serviceId: string, name: string) => (await occurrences(serviceId, name)).map((o) => o.properties)

describe('Update User Profile (updateUserProfile), the Identify Calls preset', () => {
  it('stores a Segment identify call: standard traits as profile fields, the rest as custom attributes', async () => {
    const run = await perform(
      'updateUserProfile',
      {
        type: 'identify',
        userId: 'seg-ada',
        traits: {
          firstName: 'Ada',
          lastName: 'Lovelace',
          email: 'Ada@Example.com',
          phone: '+1 415 555 2671',
          gender: 'female',
          avatar: 'https://example.com/ada.png',
          address: { city: 'London' },
          plan: 'premium',
          logins: 12,
          beta: true,
        },
      },
      { ...preset('Identify Calls'), dob: '1815-12-10T00:00:00.000Z', time_zone: 'Europe/London', language: 'en', email_subscribe: 'opted_in' },
    )
    expect(run.responses[0].data).toEqual({ message: 'success', attributes_processed: 1 })
    const u = await user('seg-ada')
    expect(u).toMatchObject({
      external_id: 'seg-ada',
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'ada@example.com',
      phone: '+14155552671',
      gender: 'F',
      dob: '1815-12-10',
      home_city: 'London',
      image_url: 'https://example.com/ada.png',
      time_zone: 'Europe/London',
      language: 'en',
      email_subscribe: 'opted_in',
      // createTestEvent's context.location: "United States" and its coordinates.
      country: 'US',
      last_coordinates: [-76.9411617, 40.2964197],
    })
    // The destination leaves out of the traits the ones it maps by their Segment names (firstName,
    // lastName, avatar); email, phone and gender are overwritten by their standard fields.
    expect(u.custom_attributes).toEqual({ plan: 'premium', logins: 12, beta: true, address: { city: 'London' } })
  })

  it('takes every standard field the action has a mapping for', async () => {
    const run = await perform(
      'updateUserProfile',
      { type: 'identify', userId: 'seg-full', traits: {} },
      {
        custom_attributes: {},
        date_of_first_session: '2024-01-02T03:04:05Z',
        date_of_last_session: '2024-02-03T04:05:06Z',
        marked_email_as_spam_at: '2024-03-04T05:06:07Z',
        email_open_tracking_disabled: true,
        email_click_tracking_disabled: true,
        push_subscribe: 'subscribed',
        facebook: { id: 'fb-1', likes: ['jazz'], num_friends: 3 },
        twitter: { id: 42, screen_name: 'seg_full', followers_count: 5, friends_count: 6, statuses_count: 7 },
        push_tokens: [{ app_id: 'app-1', token: 'tok-seg-full', device_id: 'dev-1' }],
      },
    )
    const u = await user('seg-full')
    // The destination's field types make the twitter id a string; it is kept as sent.
    expect(run.sent[0].attributes[0].twitter.id).toBe('42')
    expect(u).toMatchObject({
      date_of_first_session: '2024-01-02T03:04:05.000Z',
      date_of_last_session: '2024-02-03T04:05:06.000Z',
      marked_email_as_spam_at: '2024-03-04T05:06:07.000Z',
      email_open_tracking_disabled: true,
      email_click_tracking_disabled: true,
      push_subscribe: 'subscribed',
      facebook: { id: 'fb-1', likes: ['jazz'], num_friends: 3 },
      twitter: { id: '42', screen_name: 'seg_full', followers_count: 5, friends_count: 6, statuses_count: 7 },
    })
    expect(u.push_tokens).toEqual([expect.objectContaining({ app: 'app-1', token: 'tok-seg-full', device_id: 'dev-1' })])
  })

  it('sets subscription group states', async () => {
    const g = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'seg-news', channel: 'email' })
    expect(g.status, g.text).toBe(201)
    const id = g.body.subscription_group_id as string
    await perform('updateUserProfile', { type: 'identify', userId: 'seg-subs', traits: { email: 'subs@example.com' } }, {
      subscription_groups: [{ subscription_group_id: id, subscription_state: 'subscribed' }],
    })
    expect((await user('seg-subs')).subscription_groups).toEqual([{ subscription_group_id: id, subscription_state: 'subscribed' }])
  })

  it('updates only existing users with _update_existing_only', async () => {
    const run = await perform('updateUserProfile', { type: 'identify', userId: 'seg-nobody', traits: { firstName: 'No' } }, { _update_existing_only: true })
    expect(run.progress[0].errors).toEqual([expect.objectContaining({ type: 'user_not_found', index: 0 })])
    expect(await user('seg-nobody')).toBeUndefined()
  })

  it('batched: one request for the batch, one user each, a refused payload marked at its own index', async () => {
    const run = await performBatch(
      'updateUserProfile',
      [
        { type: 'identify', userId: 'seg-b1', traits: { firstName: 'B1', tier: 1 } },
        { type: 'identify', userId: 'seg-b2', traits: { firstName: 'B2', email: 'not-an-address' } },
        { type: 'identify', userId: 'seg-b3', traits: { firstName: 'B3', tier: 3 } },
      ],
      preset('Identify Calls'),
    )
    expect(run.responses).toHaveLength(1)
    expect(run.responses[0].request.headers.get('x-braze-batch')).toBe('true')
    expect(run.sent[0].attributes).toHaveLength(3)
    expect(run.statuses.map((s) => s.status)).toEqual([200, 400, 200])
    expect(run.statuses[1].errormessage).toBe('invalid_object')
    expect((await user('seg-b1')).custom_attributes).toEqual({ tier: 1 })
    expect(await user('seg-b2')).toBeUndefined()
    expect((await user('seg-b3')).first_name).toBe('B3')
  })
})

describe('Update User Profile V2 (updateUserProfile2)', () => {
  it('updates an existing user and creates nobody (its one sync mode is "update")', async () => {
    await perform('updateUserProfile', { type: 'identify', userId: 'seg-v2', traits: { firstName: 'Before' } })
    const run = await perform('updateUserProfile2', { type: 'identify', userId: 'seg-v2', traits: { firstName: 'After', level: 2 } }, { __segment_internal_sync_mode: 'update' })
    expect(run.sent[0].attributes[0]._update_existing_only).toBe(true)
    const u = await user('seg-v2')
    expect(u.first_name).toBe('After')
    expect(u.custom_attributes).toEqual({ level: 2 })

    const none = await perform('updateUserProfile2', { type: 'identify', userId: 'seg-v2-new', traits: { firstName: 'New' } }, { __segment_internal_sync_mode: 'update' })
    expect(none.progress[0].errors).toEqual([expect.objectContaining({ type: 'user_not_found' })])
    expect(await user('seg-v2-new')).toBeUndefined()
  })

  it('batched', async () => {
    await performBatch('updateUserProfile', [1, 2].map((i) => ({ type: 'identify', userId: `seg-v2b${i}`, traits: { firstName: 'x' } })))
    const run = await performBatch(
      'updateUserProfile2',
      [1, 2].map((i) => ({ type: 'identify', userId: `seg-v2b${i}`, traits: { firstName: `V2B${i}` } })),
      { __segment_internal_sync_mode: 'update' },
    )
    expect(run.statuses.map((s) => s.status)).toEqual([200, 200])
    expect((await user('seg-v2b1')).first_name).toBe('V2B1')
    expect((await user('seg-v2b2')).first_name).toBe('V2B2')
  })
})

describe('Track Event (trackEvent), the Track Calls preset, and Track Event V2 (trackEvent2)', () => {
  it('stores a Segment track call as a custom event with its properties, the user created by it', async () => {
    const run = await perform(
      'trackEvent',
      { type: 'track', userId: 'seg-ev', event: 'Video Played', properties: { title: 'Intro', seconds: 42, tags: ['a', 'b'], player: { muted: false } }, context: { traits: { email: 'ev@example.com' } } },
      preset('Track Calls'),
    )
    expect(run.responses[0].data).toEqual({ message: 'success', events_processed: 1 })
    // Identified by external_id and email at once, as the preset sends it.
    expect(run.sent[0].events[0]).toMatchObject({ external_id: 'seg-ev', email: 'ev@example.com', name: 'Video Played' })
    const u = await user('seg-ev')
    expect(eventNames(u)).toEqual(['Video Played:1'])
    expect(await eventProperties(u.service_id, 'Video Played')).toEqual([{ title: 'Intro', seconds: 42, tags: ['a', 'b'], player: { muted: false } }])
  })

  it('names the user by braze_id (our service_id), and by email alone', async () => {
    const known = await user('seg-ev')
    await perform('trackEvent', { type: 'track', userId: null, event: 'By Braze Id', properties: { braze_id: known.service_id } })
    await perform('trackEvent', { type: 'track', userId: null, event: 'By Email', properties: {}, context: { traits: { email: 'only-email@example.com' } } })
    expect(eventNames(await user('seg-ev'))).toEqual(['By Braze Id:1', 'Video Played:1'])
    const byEmail = (await env.readUsers(ws.key, { email_address: 'only-email@example.com' })).users
    expect(byEmail.map(eventNames)).toEqual([['By Email:1']])
  })

  it('batched', async () => {
    const run = await performBatch('trackEvent', [
      { type: 'track', userId: 'seg-evb', event: 'Step', properties: { n: 1 } },
      { type: 'track', userId: 'seg-evb', event: 'Step', properties: { n: 2 } },
      { type: 'track', userId: 'seg-evb2', event: 'Other' },
    ])
    expect(run.responses).toHaveLength(1)
    expect(run.statuses.map((s) => s.status)).toEqual([200, 200, 200])
    const u = await user('seg-evb')
    expect(eventNames(u)).toEqual(['Step:2'])
    expect(await eventProperties(u.service_id, 'Step')).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]))
    expect(eventNames(await user('seg-evb2'))).toEqual(['Other:1'])
  })

  it('V2 "add" creates the user; "update" touches only existing users', async () => {
    await perform('trackEvent2', { type: 'track', userId: 'seg-ev2', event: 'Added' }, { __segment_internal_sync_mode: 'add' })
    expect(eventNames(await user('seg-ev2'))).toEqual(['Added:1'])
    await perform('trackEvent2', { type: 'track', userId: 'seg-ev2', event: 'Updated' }, { __segment_internal_sync_mode: 'update' })
    const none = await perform('trackEvent2', { type: 'track', userId: 'seg-ev2-none', event: 'Updated' }, { __segment_internal_sync_mode: 'update' })
    expect(none.sent[0].events[0]._update_existing_only).toBe(true)
    expect(none.progress[0].errors).toEqual([expect.objectContaining({ type: 'user_not_found' })])
    expect(eventNames(await user('seg-ev2'))).toEqual(['Added:1', 'Updated:1'])
    expect(await user('seg-ev2-none')).toBeUndefined()
  })

  it('V2 batched', async () => {
    const run = await performBatch(
      'trackEvent2',
      [1, 2].map((i) => ({ type: 'track', userId: `seg-ev2b${i}`, event: 'Batched V2' })),
      { __segment_internal_sync_mode: 'add' },
    )
    expect(run.statuses.map((s) => s.status)).toEqual([200, 200])
    expect(eventNames(await user('seg-ev2b1'))).toEqual(['Batched V2:1'])
    expect(eventNames(await user('seg-ev2b2'))).toEqual(['Batched V2:1'])
  })
})

const orderCompleted = (userId: string, orderId: string) => ({
  type: 'track',
  userId,
  event: 'Order Completed',
  properties: {
    order_id: orderId,
    checkout_id: `chk-${orderId}`,
    total: 44.5,
    currency: 'EUR',
    source: 'web',
    products: [
      { product_id: 'sku-1', name: 'Mug', price: 12.5, quantity: 2, variant: 'blue' },
      { product_id: 'sku-2', name: 'Tea', price: 19.5, quantity: 1 },
    ],
  },
})

describe('Track Purchase (trackPurchase) and Track Purchase V2 (trackPurchase2)', () => {
  it('stores one purchase per product, the event properties on each', async () => {
    const run = await perform('trackPurchase', orderCompleted('seg-buy', 'o-1'))
    expect(run.responses[0].request.headers.get('x-braze-batch')).toBe('true')
    expect(run.responses[0].data).toEqual({ message: 'success', purchases_processed: 2 })
    const u = await user('seg-buy')
    expect(u.purchases.map((p: any) => `${p.name}:${p.count}`).sort()).toEqual(['sku-1:1', 'sku-2:1'])
    const [mug] = await occurrences(u.service_id, 'sku-1')
    // The destination takes a product's own currency, else USD: Segment's event-level currency is a property.
    expect(run.sent[0].purchases[0].currency).toBe('USD')
    expect(mug).toMatchObject({ price: 12.5, quantity: 2, currency: 'USD' })
    expect(mug.properties).toEqual({ name: 'Mug', variant: 'blue', order_id: 'o-1', checkout_id: 'chk-o-1', total: 44.5, currency: 'EUR', source: 'web' })
  })

  it('batched: the products of several orders in one request', async () => {
    const run = await performBatch('trackPurchase', [orderCompleted('seg-buyb', 'o-2'), orderCompleted('seg-buyb', 'o-3')])
    expect(run.sent[0].purchases).toHaveLength(4)
    expect(run.statuses.map((s) => s.status)).toEqual([200, 200])
    const u = await user('seg-buyb')
    expect(u.purchases.map((p: any) => `${p.name}:${p.count}`).sort()).toEqual(['sku-1:2', 'sku-2:2'])
  })

  it('V2 "update" does not create the buyer; "add" does; batched too', async () => {
    const none = await perform('trackPurchase2', orderCompleted('seg-buy2', 'o-4'), { __segment_internal_sync_mode: 'update' })
    expect(none.progress[0].errors?.map((e) => e.type)).toEqual(['user_not_found', 'user_not_found'])
    expect(await user('seg-buy2')).toBeUndefined()
    await perform('trackPurchase2', orderCompleted('seg-buy2', 'o-5'), { __segment_internal_sync_mode: 'add' })
    const run = await performBatch('trackPurchase2', [orderCompleted('seg-buy2', 'o-6')], { __segment_internal_sync_mode: 'update' })
    expect(run.statuses.map((s) => s.status)).toEqual([200])
    expect((await user('seg-buy2')).purchases.map((p: any) => `${p.name}:${p.count}`).sort()).toEqual(['sku-1:2', 'sku-2:2'])
  })
})

describe('Ecommerce events (ecommerce, ecommerceSingleProduct), their presets', () => {
  const products = [
    { product_id: 'sku-1', name: 'Mug', price: 12.5, quantity: 2, variant: 'blue', image_url: 'https://example.com/mug.png', url: 'https://example.com/mug', color: 'blue' },
  ]
  const ecommerceProperties = { order_id: 'o-e1', checkout_id: 'chk-e1', cart_id: 'cart-1', total: 25, discount: 2, currency: 'USD', source: 'web', products, reason: 'changed mind' }

  it.each([
    ['Order Placed (beta)', 'Order Completed', EVENT_NAMES.ORDER_PLACED],
    ['Checkout Started (beta)', 'Checkout Started', EVENT_NAMES.CHECKOUT_STARTED],
    ['Order Refunded (beta)', 'Order Refunded', EVENT_NAMES.ORDER_REFUNDED],
    ['Order Cancelled (beta)', 'Order Cancelled', EVENT_NAMES.ORDER_CANCELLED],
  ])('%s stores the %s event with its nested products', async (presetName, segmentEvent, brazeName) => {
    const userId = `seg-ecom-${brazeName}`
    await perform('ecommerce', { type: 'track', userId, event: segmentEvent, properties: ecommerceProperties }, { ...preset(presetName), __segment_internal_sync_mode: 'add' })
    const u = await user(userId)
    expect(eventNames(u)).toEqual([`${brazeName}:1`])
    const [props] = await eventProperties(u.service_id, brazeName)
    expect(props).toMatchObject({ currency: 'USD', source: 'web', total_value: 25 })
    expect(props.products).toEqual([
      { quantity: 2, product_id: 'sku-1', product_name: 'Mug', variant_id: 'blue', price: 12.5, image_url: 'https://example.com/mug.png', product_url: 'https://example.com/mug' },
    ])
  })

  it('Product Viewed (beta) stores the single product event', async () => {
    await perform(
      'ecommerceSingleProduct',
      { type: 'track', userId: 'seg-viewer', event: 'Product Viewed', properties: { product_id: 'sku-9', name: 'Pot', price: 30, variant: 'red', currency: 'USD', source: 'app' } },
      { ...preset('Product Viewed (beta)'), __segment_internal_sync_mode: 'add' },
    )
    const u = await user('seg-viewer')
    expect(eventNames(u)).toEqual([`${EVENT_NAMES.PRODUCT_VIEWED}:1`])
    expect((await eventProperties(u.service_id, EVENT_NAMES.PRODUCT_VIEWED))[0]).toMatchObject({ product_id: 'sku-9', product_name: 'Pot', price: 30, currency: 'USD', source: 'app' })
  })

  it('batched, both; with the "update" sync mode an unknown user is reported in the progress at its index', async () => {
    await perform('updateUserProfile', { type: 'identify', userId: 'seg-ecom-b', traits: {} })
    const run = await performBatch(
      'ecommerce',
      [
        { type: 'track', userId: 'seg-ecom-b', event: 'Order Completed', properties: ecommerceProperties },
        { type: 'track', userId: 'seg-ecom-b', event: 'Order Completed', properties: { ...ecommerceProperties, order_id: 'o-e2' } },
      ],
      { ...preset('Order Placed (beta)'), __segment_internal_sync_mode: 'update' },
    )
    expect(run.statuses.map((s) => s.status)).toEqual([200, 200])
    const single = await performBatch(
      'ecommerceSingleProduct',
      [
        { type: 'track', userId: 'seg-ecom-b', event: 'Product Viewed', properties: { product_id: 'sku-9', name: 'Pot', price: 30, variant: 'red', currency: 'USD', source: 'app' } },
        { type: 'track', userId: 'seg-ecom-none', event: 'Product Viewed', properties: { product_id: 'sku-9', name: 'Pot', price: 30, variant: 'red', currency: 'USD', source: 'app' } },
      ],
      { ...preset('Product Viewed (beta)'), __segment_internal_sync_mode: 'update' },
    )
    // A user an object may not create is reported in the request's progress, not in the answer
    // the destination reads, so it counts both payloads delivered (docs/compatibility.md).
    expect(single.statuses.map((s) => s.status)).toEqual([200, 200])
    expect(single.progress[0].errors).toEqual([expect.objectContaining({ type: 'user_not_found', index: 1 })])
    expect(eventNames(await user('seg-ecom-b'))).toEqual([`${EVENT_NAMES.ORDER_PLACED}:2`, `${EVENT_NAMES.PRODUCT_VIEWED}:1`])
    expect(await user('seg-ecom-none')).toBeUndefined()
  })
})

describe('Create Alias (createAlias, createAlias2), Identify User (identifyUser, identifyUser2)', () => {
  it('creates an alias-only user, gives it attributes, then identifies it', async () => {
    const run = await perform('createAlias', { type: 'track', event: 'Create Alias' }, { alias_name: 'anon-1', alias_label: 'segment_anonymous_id' })
    expect(run.responses[0].data).toEqual({ message: 'success', aliases_processed: 1 })
    await perform(
      'updateUserProfile',
      { type: 'identify', userId: null, traits: { firstName: 'Anon' } },
      { user_alias: { alias_name: 'anon-1', alias_label: 'segment_anonymous_id' } },
    )
    expect((await byAlias('anon-1', 'segment_anonymous_id')).first_name).toBe('Anon')

    await perform('identifyUser', { type: 'track' }, { external_id: 'seg-known-1', user_alias: { alias_name: 'anon-1', alias_label: 'segment_anonymous_id' }, merge_behavior: 'merge' })
    const u = await user('seg-known-1')
    expect(u.first_name).toBe('Anon')
    expect(u.user_aliases).toEqual([{ alias_name: 'anon-1', alias_label: 'segment_anonymous_id' }])
  })

  it('adds an alias to an identified user (createAlias2, sync mode "add")', async () => {
    await perform('updateUserProfile', { type: 'identify', userId: 'seg-aliased', traits: { firstName: 'Al' } })
    await perform('createAlias2', { type: 'track' }, { external_id: 'seg-aliased', alias_name: 'crm-77', alias_label: 'crm_id', __segment_internal_sync_mode: 'add' })
    expect((await byAlias('crm-77', 'crm_id')).external_id).toBe('seg-aliased')
  })

  it('Identify User V2 identifies an alias-only user, and an email-only user with a prioritization', async () => {
    await perform('createAlias2', { type: 'track' }, { alias_name: 'anon-2', alias_label: 'segment_anonymous_id', __segment_internal_sync_mode: 'add' })
    await perform('identifyUser2', { type: 'track' }, {
      external_id: 'seg-known-2',
      user_alias: { alias_name: 'anon-2', alias_label: 'segment_anonymous_id' },
      __segment_internal_sync_mode: 'add',
    })
    expect((await user('seg-known-2')).user_aliases).toEqual([{ alias_name: 'anon-2', alias_label: 'segment_anonymous_id' }])

    await perform('updateUserProfile', { type: 'identify', userId: null, traits: { email: 'lead@example.com', firstName: 'Lead' } })
    const run = await perform('identifyUser2', { type: 'track' }, {
      external_id: 'seg-known-3',
      email_to_identify: 'lead@example.com',
      prioritization: { first_priority: 'unidentified', second_priority: 'most_recently_updated' },
      __segment_internal_sync_mode: 'upsert',
    })
    expect(run.sent[0]).toEqual({ emails_to_identify: [{ external_id: 'seg-known-3', email: 'lead@example.com', prioritization: ['unidentified', 'most_recently_updated'] }] })
    expect(await user('seg-known-3')).toMatchObject({ email: 'lead@example.com', first_name: 'Lead' })
  })
})

describe('the destination\'s deletion (onDelete)', () => {
  it('deletes the user by external id', async () => {
    await perform('updateUserProfile', { type: 'identify', userId: 'seg-gone', traits: { firstName: 'Gone' } })
    // Destination.onDelete checks the endpoint setting against the reference's region URLs, so
    // the definition's own onDelete runs here with the request client actions-core gives it.
    const request = core.createRequestClient(braze.extendRequest({ settings }))
    const response = (await braze.onDelete(request, { payload: { userId: 'seg-gone' }, settings })) as Response
    expect(response.data).toEqual({ message: 'success', deleted: 1 })
    await applied([response])
    expect(await user('seg-gone')).toBeUndefined()
    await until('the deleted user to stay gone', () => user('seg-gone'), (u) => u === undefined, 2_000)
  })
})
