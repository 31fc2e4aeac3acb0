import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

// The Python clients braze-client (PyPI; source github.com/dtatarkin/braze-client at 67ab18a) and
// edx-braze-client (source github.com/edx/braze-client at d42209c, version 1.1.3) cannot be
// installed here: PyPI is out of reach and Debian does not package them. So these are not the
// clients running: they are the requests their methods build, body and headers as their source
// writes them, sent to the service, with what each method then reads from the answer checked.
// docs/compatibility.md lists the methods and what passes.

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

/** POST as both clients do: a JSON body, the key as a bearer token (braze-client with use_auth_header=True). */
const post = (path: string, body: unknown, key: string | null = ws.key) => request(env.baseUrl, 'POST', path, { token: key ?? undefined, body })
const user = async (externalId: string) => (await env.readUsers(ws.key, { external_ids: [externalId] })).users[0]
const userWhen = (externalId: string, done: (u: any) => boolean) => until(`user ${externalId}`, () => user(externalId), done)

describe('braze-client', () => {
  it('user_track sends all three lists, unused ones empty; the client needs message "success"', async () => {
    const r = await post('/users/track', {
      events: [{ external_id: 'py-1', app_id: 'app', name: 'signed_up', time: new Date().toISOString() }],
      attributes: [{ external_id: 'py-1', first_name: 'Py', email: 'py@example.com' }],
      purchases: [],
    })
    expect(r.status, r.text).toBe(201)
    expect(r.body.message).toBe('success')
    const u = await userWhen('py-1', (x) => x?.custom_events?.length === 1)
    expect(u).toMatchObject({ first_name: 'Py', email: 'py@example.com' })
  })

  it('user_track without use_auth_header puts api_key in the body, which the service does not read (401)', async () => {
    const r = await post('/users/track', { events: [], attributes: [{ external_id: 'py-2' }], purchases: [], api_key: ws.key }, null)
    expect(r.status).toBe(401)
  })

  it('user_export by external_ids or email_address with fields_to_export, and user_delete', async () => {
    const byIds = await post('/users/export/ids', { external_ids: ['py-1'], fields_to_export: ['external_id', 'first_name'] })
    expect(byIds.body).toEqual({ message: 'success', users: [{ external_id: 'py-1', first_name: 'Py' }] })
    const byEmail = await post('/users/export/ids', { email_address: 'py@example.com' })
    expect(byEmail.body.users.map((u: any) => u.external_id)).toEqual(['py-1'])

    const del = await post('/users/delete', { external_ids: ['py-1'] })
    expect(del.body).toEqual({ message: 'success', deleted: 1 })
    await userWhen('py-1', (u) => u === undefined)
  })
})

describe('edx-braze-client', () => {
  it('create_braze_alias: looks the emails up by alias, adds the aliases, then tracks them with the email', async () => {
    const aliases = ['a@example.com', 'b@example.com'].map((email) => ({ alias_label: 'Enterprise', alias_name: email }))
    const lookup = await post('/users/export/ids', { user_aliases: aliases, fields_to_export: ['external_id', 'email'] })
    expect(lookup.body.users).toEqual([])
    expect((await post('/users/alias/new', { user_aliases: aliases })).status).toBe(201)
    const tracked = await post('/users/track', { attributes: aliases.map((a) => ({ user_alias: a, email: a.alias_name })) })
    expect(tracked.body).toEqual({ message: 'success', attributes_processed: 2 })
    const found = await until(
      'both alias users with their email',
      () => post('/users/export/ids', { user_aliases: aliases, fields_to_export: ['external_id', 'email'] }),
      (r) => r.body.users.length === 2 && r.body.users.every((u: any) => u.email),
    )
    // get_braze_external_id_batch reads user['email'] and user.get('external_id').
    expect(found.body.users.map((u: any) => u.email).sort()).toEqual(['a@example.com', 'b@example.com'])
  })

  it('identify_users, then get_braze_external_id reads users[0].external_id by email', async () => {
    const r = await post('/users/identify', { aliases_to_identify: [{ external_id: '1001', user_alias: { alias_label: 'Enterprise', alias_name: 'a@example.com' } }] })
    expect(r.body).toEqual({ aliases_processed: 1, message: 'success' })
    await userWhen('1001', (u) => u !== undefined)
    const read = await post('/users/export/ids', { email_address: 'a@example.com', fields_to_export: ['external_id'] })
    expect(read.body.users).toEqual([{ external_id: '1001' }])
  })

  it('create_recipients identifies with the lms_user_id as given: a number is refused (400)', async () => {
    const r = await post('/users/identify', { aliases_to_identify: [{ external_id: 1002, user_alias: { alias_label: 'Enterprise', alias_name: 'b@example.com' } }] })
    expect(r.status).toBe(400)
    expect(r.body.message).toMatch(/^aliases_to_identify\.0\.external_id: /)
  })

  it('track_user sends up to 75 objects a list', async () => {
    const attributes = Array.from({ length: 75 }, (_, i) => ({ external_id: `edx-${i}`, is_enterprise_learner: true }))
    expect((await post('/users/track', { attributes })).body).toEqual({ message: 'success', attributes_processed: 75 })
    expect((await userWhen('edx-74', (u) => u !== undefined)).custom_attributes).toEqual({ is_enterprise_learner: true })
  })

  it('unsubscribe_user_email, then retrieve_unsubscribed_emails reads response["emails"]', async () => {
    await post('/users/track', { attributes: [{ external_id: 'edx-u', email: 'unsub@example.com', email_subscribe: 'subscribed' }] })
    await userWhen('edx-u', (u) => u?.email_subscribe === 'subscribed')
    const r = await post('/email/status', { email: 'unsub@example.com', subscription_state: 'unsubscribed' })
    expect(r.body).toEqual({ message: 'success' })
    await userWhen('edx-u', (u) => u?.email_subscribe === 'unsubscribed')
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)
    const params = new URLSearchParams({ start_date: day(-1), end_date: day(1), limit: '500', offset: '0', sort_direction: 'desc' })
    const list = await request(env.baseUrl, 'GET', `/email/unsubscribes?${params}`, { token: ws.key })
    expect(list.status, list.text).toBe(200)
    expect(list.body.emails).toContainEqual({ email: 'unsub@example.com', unsubscribed_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \+0000$/) })
  })
})
