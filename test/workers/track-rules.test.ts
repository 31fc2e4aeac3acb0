import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readSnapshots } from '../../shared/clickhouse/snapshot-repository.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

const trackAndWait = (body: unknown) => env.writeAndWait(ws.key, '/users/track', body)
const read = (body: unknown) => env.readUsers(ws.key, body)

async function profileCount(where: string, values: unknown[]) {
  const r = await env.ctx.pg.query(`SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND ${where}`, [ws.id, ...values])
  return r.rows[0].n as number
}

describe('identification rules of /users/track', () => {
  it('creates an alias-only profile only with _update_existing_only false', async () => {
    const alias = { alias_name: 'anon-1', alias_label: 'device' }
    const skipped = await trackAndWait({ attributes: [{ user_alias: alias, color: 'blue' }] })
    expect(skipped.progress.errors).toEqual([expect.objectContaining({ input_array: 'attributes', index: 0, message: expect.stringMatching(/no user found/) })])
    expect((await read({ user_aliases: [alias] })).users).toEqual([])

    await trackAndWait({ attributes: [{ user_alias: alias, _update_existing_only: false, color: 'green' }] })
    await trackAndWait({ events: [{ user_alias: alias, name: 'opened', time: new Date().toISOString() }] })
    const u = (await read({ user_aliases: [alias] })).users[0]
    expect(u.user_aliases).toEqual([alias])
    expect(u.external_id).toBeUndefined()
    expect(u.custom_attributes).toEqual({ color: 'green' })
    expect(u.custom_events).toEqual([expect.objectContaining({ name: 'opened', count: 1 })])
  })

  it('creates an email-only profile when no profile has the email', async () => {
    await trackAndWait({ attributes: [{ email: 'New.Person@Example.com', first_name: 'New' }] })
    const out = await read({ email_address: 'new.person@example.com' })
    expect(out.users).toHaveLength(1)
    expect(out.users[0]).toMatchObject({ email: 'new.person@example.com', first_name: 'New' })
    expect(out.users[0].external_id).toBeUndefined()
    expect(out.users[0].user_aliases).toBeUndefined()
  })

  it('updates the most recently updated of several profiles sharing an email', async () => {
    await trackAndWait({ attributes: [{ external_id: 'share-a', email: 'shared@example.com' }] })
    await trackAndWait({ attributes: [{ external_id: 'share-b', email: 'shared@example.com' }] })
    await trackAndWait({ attributes: [{ email: 'shared@example.com', picked: true }] })
    const [a, b] = (await read({ external_ids: ['share-a', 'share-b'] })).users
    expect(a.custom_attributes).toBeUndefined()
    expect(b.custom_attributes).toEqual({ picked: true })
  })

  it('makes a user who only got an event the most recently updated of those sharing its email', async () => {
    await trackAndWait({ attributes: [{ external_id: 'pair-first', email: 'pair@example.com' }] })
    await trackAndWait({ attributes: [{ external_id: 'pair-second', email: 'pair@example.com' }] })
    await trackAndWait({ events: [{ external_id: 'pair-first', name: 'visited', time: new Date().toISOString() }] })
    await trackAndWait({ attributes: [{ email: 'pair@example.com', picked: true }] })
    const users = (await read({ external_ids: ['pair-first', 'pair-second'] })).users
    expect(users.map((u) => [u.external_id, u.custom_attributes])).toEqual([
      ['pair-first', { picked: true }],
      ['pair-second', undefined],
    ])
  })

  it('accepts only valid phone numbers and stores them in E.164', async () => {
    const r = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [{ phone: '12345' }, { phone: '+1 (415) 555-2671', city_hint: 'sf' }] } })
    expect(r.body.errors).toEqual([expect.objectContaining({ index: 0, message: expect.stringMatching(/^attributes\[0\]\.phone: must be a valid phone number/) })])
    await env.waitForRequest(ws.key, r.headers.get('x-request-id')!)
    const out = await read({ phone: '+14155552671' })
    expect(out.users[0]).toMatchObject({ phone: '+14155552671', custom_attributes: { city_hint: 'sf' } })
  })

  it('does not create a profile for an unknown external_id with _update_existing_only true', async () => {
    const { progress } = await trackAndWait({ attributes: [{ external_id: 'ghost', _update_existing_only: true, a: 1 }] })
    expect(progress.status).toBe('done')
    expect(progress.errors?.[0]).toMatchObject({ type: 'user_not_found', message: 'no user found for external_id ghost' })
    expect(await profileCount('external_id = $2', ['ghost'])).toBe(0)
  })

  it('finds a profile by service_id and never creates one for an unknown service_id', async () => {
    await trackAndWait({ attributes: [{ external_id: 'svc-user' }] })
    const sid = (await read({ external_ids: ['svc-user'] })).users[0].service_id
    await trackAndWait({ attributes: [{ service_id: sid, tier: 'gold' }, { service_id: 'deadbeef', tier: 'x' }] })
    expect((await read({ service_id: sid })).users[0].custom_attributes).toEqual({ tier: 'gold' })
    expect((await read({ service_id: 'deadbeef' })).invalid_user_ids).toEqual(['deadbeef'])
  })

  it('keeps external_id and user_alias from being removed', async () => {
    const r = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [{ external_id: null }] } })
    expect(r.status).toBe(400)
    expect(r.body.errors[0].message).toMatch(/external_id/)
  })
})

describe('push tokens', () => {
  it('imports tokens as temporary anonymous profiles; a real user claiming the token removes the temporary one', async () => {
    const token = { app_id: 'app1', token: 'tok-123', device_id: 'd1' }
    await trackAndWait({ attributes: [{ push_token_import: true, push_tokens: [token, { app_id: 'app1', token: 'tok-456' }], source: 'import' }] })
    expect(await profileCount('push_import_anonymous', [])).toBe(2)
    await trackAndWait({ attributes: [{ push_token_import: true, push_tokens: [token] }] })
    expect(await profileCount('push_import_anonymous', [])).toBe(2)

    const anon = await env.ctx.pg.query('SELECT p.id FROM profiles p JOIN push_tokens t ON t.profile_id = p.id WHERE t.token = $1', ['tok-123'])
    await trackAndWait({ attributes: [{ external_id: 'real-user', push_tokens: [token] }] })
    const u = (await read({ external_ids: ['real-user'] })).users[0]
    expect(u.push_tokens).toEqual([{ app: 'app1', token: 'tok-123', device_id: 'd1', notifications_enabled: true }])
    expect(await profileCount('push_import_anonymous', [])).toBe(1)
    expect((await readSnapshots(env.clickhouse, ws.id, [anon.rows[0].id])).size).toBe(0)
  })

  it('refuses push_token_import with an external_id', async () => {
    const r = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [{ push_token_import: true, external_id: 'x', push_tokens: [{ app_id: 'a', token: 't' }] }] } })
    expect(r.status).toBe(400)
    expect(r.body.errors[0].message).toMatch(/do not send external_id or service_id/)
  })
})

describe('subscriptions through /users/track', () => {
  it('sets group states and email_subscribe, and updates every user sharing the email', async () => {
    const g = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'weekly', channel: 'email' })
    const gid = g.body.subscription_group_id
    await trackAndWait({ attributes: [{ external_id: 'sub-a', email: 'family@example.com' }, { external_id: 'sub-b', email: 'family@example.com' }] })
    await trackAndWait({
      attributes: [{ external_id: 'sub-a', email_subscribe: 'opted_in', subscription_groups: [{ subscription_group_id: gid, subscription_state: 'subscribed' }] }],
    })
    const users = (await read({ external_ids: ["sub-a", "sub-b"] })).users
    for (const u of users) {
      expect(u.email_subscribe).toBe('opted_in')
      expect(u.subscription_groups).toEqual([{ subscription_group_id: gid, subscription_state: 'subscribed' }])
    }
    const { progress } = await trackAndWait({ attributes: [{ external_id: 'sub-a', subscription_groups: [{ subscription_group_id: 'nope', subscription_state: 'subscribed' }] }] })
    expect(progress.errors?.[0]).toMatchObject({ type: 'unknown_subscription_group', message: 'unknown subscription_group_id nope' })
  })
})

describe('email states stored for an address', () => {
  it('apply to a profile that gets the address later, unless the same object sets email_subscribe itself', async () => {
    const status = await env.call('POST', '/email/status', { key: ws.key, body: { email: 'later@example.com', subscription_state: 'unsubscribed' } })
    expect(status.status).toBe(201)
    expect((await env.waitForRequest(ws.key, status.headers.get('x-request-id')!)).status).toBe('done')
    await trackAndWait({ attributes: [{ external_id: 'later-plain', email: 'later@example.com' }] })
    expect((await read({ external_ids: ['later-plain'] })).users[0].email_subscribe).toBe('unsubscribed')
    // The later explicit write wins, and reaches every user sharing the address (section 3).
    await trackAndWait({ attributes: [{ external_id: 'later-explicit', email: 'later@example.com', email_subscribe: 'subscribed' }] })
    const users = (await read({ external_ids: ['later-plain', 'later-explicit'] })).users
    const states = Object.fromEntries(users.map((u: { external_id: string; email_subscribe: string }) => [u.external_id, u.email_subscribe]))
    expect(states).toEqual({ 'later-plain': 'subscribed', 'later-explicit': 'subscribed' })
  })
})

describe('fatal errors', () => {
  it('refuses blocked external ids with the fatal text and applies nothing', async () => {
    // A workspace configured before its first request (API processes cache settings for a second).
    const blocking = await env.workspace()
    await env.admin('PUT', `/admin/v1/workspaces/${blocking.id}/blocked_external_ids`, { external_ids: ['dummy'] })
    const r = await env.call('POST', '/users/track', { key: blocking.key, body: { attributes: [{ external_id: 'fine', a: 1 }], events: [{ external_id: 'dummy', name: 'x', time: new Date().toISOString() }] } })
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: 'provided external_id is blacklisted and disallowed', errors: ['provided external_id is blacklisted and disallowed'] })
    const fine = await env.ctx.pg.query('SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1', [blocking.id])
    expect(fine.rows[0].n).toBe(0)
  })

  it('refuses more than 75 objects of a kind', async () => {
    const attributes = Array.from({ length: 76 }, (_, i) => ({ external_id: `many-${i}` }))
    const r = await env.call('POST', '/users/track', { key: ws.key, body: { attributes } })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('attributes: at most 75 attributes objects per request')
    expect(r.body.errors).toEqual([r.body.message])
  })

  it('refuses a body with nothing to track, and one that is not an object', async () => {
    expect((await env.call('POST', '/users/track', { key: ws.key, body: {} })).body.message).toBe('request must contain attributes, events or purchases')
    const empty = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [], events: [], purchases: [] } })
    expect(empty.status).toBe(400)
    expect(empty.body.message).toBe('request must contain attributes, events or purchases')
    expect((await env.call('POST', '/users/track', { key: ws.key, body: [1] })).status).toBe(400)
  })
})

describe('ordering', () => {
  it('applies requests for one user in acceptance order with many workers', async () => {
    await env.startWorkers(['track'])
    await env.startWorkers(['track'])
    const ids: string[] = []
    for (let i = 1; i <= 40; i++) {
      const r = await env.call('POST', '/users/track', {
        key: ws.key,
        body: { attributes: [{ external_id: 'ordered', last: i, total: { inc: i }, seen: { add: [i] } }] },
      })
      ids.push(r.headers.get('x-request-id')!)
    }
    for (const id of ids) await env.waitForRequest(ws.key, id)
    const u = (await read({ external_ids: ['ordered'] })).users[0]
    expect(u.custom_attributes.last).toBe(40)
    expect(u.custom_attributes.total).toBe((40 * 41) / 2)
    expect(u.custom_attributes.seen).toEqual(Array.from({ length: 40 }, (_, i) => i + 1))
  })
})
