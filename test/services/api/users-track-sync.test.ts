import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity'] })
})
afterAll(async () => {
  await env.close()
})
beforeEach(async () => {
  ws = await env.workspace()
})

const sync = (body: unknown, key = ws.key, headers?: Record<string, string>) => env.call('POST', '/users/track/sync', { key, body, headers })

describe('POST /users/track/sync', () => {
  it('answers after the attributes applied, with the custom attributes the request named', async () => {
    await env.writeAndWait(ws.key, '/users/track', { attributes: [{ external_id: 'xyz123', other: 1 }] })
    const r = await sync({ attributes: [{ external_id: 'xyz123', string_attribute: 'fruit', integer_attribute: 25, array_attribute: ['banana', 'apple'] }] })
    expect(r.status, r.text).toBe(201)
    expect(r.body).toEqual({
      users: [{ external_id: 'xyz123', custom_attributes: { string_attribute: 'fruit', integer_attribute: 25, array_attribute: ['banana', 'apple'] } }],
      message: 'success',
    })
    // Applied already when answered: the next read sees it without waiting.
    const [user] = (await env.readUsers(ws.key, { external_ids: ['xyz123'] })).users
    expect(user.custom_attributes).toEqual({ other: 1, string_attribute: 'fruit', integer_attribute: 25, array_attribute: ['banana', 'apple'] })
  })

  it('answers an event with its summary, in sequence for one user', async () => {
    const event = (time: string) => ({ events: { email: 'Test@Example.com', name: 'rented_movie', time } })
    expect((await sync(event('2022-12-06T19:20:45+01:00'))).status).toBe(201)
    const r = await sync(event('2022-12-07T10:00:00Z'))
    expect(r.status, r.text).toBe(201)
    expect(r.body.users).toEqual([
      { email: 'test@example.com', custom_events: [{ name: 'rented_movie', first: '2022-12-06T18:20:45.000Z', last: '2022-12-07T10:00:00.000Z', count: 2 }] },
    ])
  })

  it('answers a purchase by alias with its product summary, and an increment in order', async () => {
    const user_alias = { alias_name: 'device123', alias_label: 'my_device_identifier' }
    await sync({ attributes: { user_alias, _update_existing_only: false, visits: 1 } })
    const inc = await sync({ attributes: [{ user_alias, visits: { inc: 2 } }] })
    expect(inc.body.users[0].custom_attributes).toEqual({ visits: 3 })
    const r = await sync({ purchases: [{ user_alias, product_id: 'Completed Order', currency: 'USD', price: 219.98, time: '2022-12-06T19:20:45+01:00' }] })
    expect(r.status, r.text).toBe(201)
    expect(r.body.users).toEqual([{ user_alias, purchase_events: [{ product_id: 'Completed Order', first: '2022-12-06T18:20:45.000Z', last: '2022-12-06T18:20:45.000Z', count: 1 }] }])
  })

  it('answers no user for an update-only object naming nobody', async () => {
    const r = await sync({ attributes: [{ external_id: 'ghost', _update_existing_only: true, a: 1 }] })
    expect(r.status).toBe(201)
    expect(r.body.users).toEqual([])
    expect(r.body.errors?.[0]?.type).toBe('user_not_found')
    expect((await env.readUsers(ws.key, { external_ids: ['ghost'] })).users).toEqual([])
  })

  it('refuses more than one object of a kind, objects for two users, and bad input', async () => {
    const two = await sync({ attributes: [{ external_id: 'a' }, { external_id: 'b' }] })
    expect(two.status).toBe(400)
    expect(two.body.message).toBe('attributes: /users/track/sync takes one attributes object per request')
    const mixed = await sync({ attributes: { external_id: 'a' }, events: { external_id: 'b', name: 'e', time: new Date().toISOString() } })
    expect(mixed.body.message).toBe('every object of a /users/track/sync request must name the same user')
    expect((await sync({})).body.message).toBe('request must contain one attributes, event or purchase object')
    const bad = await sync({ events: [{ external_id: 'a', name: 'e', time: 'yesterday' }] })
    expect(bad.status).toBe(400)
    expect(bad.body.errors[0].input_array).toBe('events')
    expect((await env.readUsers(ws.key, { external_ids: ['a'] })).users).toEqual([])
    const other = await env.workspace(['users.track'])
    expect((await sync({ attributes: { external_id: 'a' } }, other.key)).status).toBe(403)
  })

  it('refuses an object naming a blocked external id, as /users/track does, and applies nothing', async () => {
    expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/blocked_external_ids`, { external_ids: ['dummy'] })).status).toBe(200)
    const r = await sync({ events: { external_id: 'dummy', name: 'e', time: new Date().toISOString() } })
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: 'provided external_id is blacklisted and disallowed', errors: ['provided external_id is blacklisted and disallowed'] })
    expect((await env.readUsers(ws.key, { external_ids: ['dummy'] })).users).toEqual([])
  })

  it('applies once for a repeated Idempotency-Key', async () => {
    const body = { attributes: { external_id: 'inc', n: { inc: 1 } } }
    const first = await sync(body, ws.key, { 'idempotency-key': 'sync-1' })
    const again = await sync(body, ws.key, { 'idempotency-key': 'sync-1' })
    expect(again.body).toEqual(first.body)
    expect((await env.readUsers(ws.key, { external_ids: ['inc'] })).users[0].custom_attributes).toEqual({ n: 1 })
  })
})

describe('POST /users/track/sync without a worker', () => {
  it('answers 202 with the request id once SYNC_WAIT_MS passed, and the work applies later', async () => {
    const idle = await startTestEnv({ env: { SYNC_WAIT_MS: '300' } })
    try {
      const w = await idle.workspace()
      const r = await idle.call('POST', '/users/track/sync', { key: w.key, body: { attributes: { external_id: 'later', a: 1 } } })
      expect(r.status, r.text).toBe(202)
      expect(r.body).toEqual({ message: 'success', status: 'queued', users: [] })
      await idle.startWorkers(['track'])
      await idle.waitForRequest(w.key, r.headers.get('x-request-id')!)
      expect((await idle.readUsers(w.key, { external_ids: ['later'] })).users[0].custom_attributes).toEqual({ a: 1 })
    } finally {
      await idle.close()
    }
  })
})
