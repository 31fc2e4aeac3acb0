import { Braze } from 'braze-api'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'
import { unzip } from '../helpers/zip.js'

// The braze-api client (npm), its published code unchanged, pointed at the service: each of its
// methods for a user-data, subscription or email endpoint, each effect read back. The client
// answers the response body only (no request id), so queued writes are awaited by reading their
// effect until it shows.

let env: TestEnv
let ws: { id: string; key: string }
let braze: Braze

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity', 'export'] })
  ws = await env.workspace()
  braze = new Braze(env.baseUrl, ws.key)
})
afterAll(async () => {
  await env.close()
})

const user = async (externalId: string) => (await env.readUsers(ws.key, { external_ids: [externalId] })).users[0]
/** Polls a user until `done` holds for it (undefined while nobody has the id). */
const userWhen = (externalId: string, done: (u: any) => boolean) => until(`user ${externalId}`, () => user(externalId), done)
const gone = (externalId: string) => userWhen(externalId, (u) => u === undefined)
const ago = (s: number) => new Date(Date.now() - s * 1000).toISOString()

describe('users', () => {
  it('track: attributes, events and purchases', async () => {
    const r = await braze.users.track({
      attributes: [{ external_id: 'ba-1', first_name: 'Grace', email: 'grace@example.com', country: 'US', plan: 'pro' } as any],
      events: [{ external_id: 'ba-1', app_id: 'app', name: 'compiled', time: ago(5), properties: { lines: 12 } }],
      purchases: [{ external_id: 'ba-1', app_id: 'app', product_id: 'cobol', currency: 'USD', price: 9.5, quantity: 2, time: ago(4) }],
    })
    expect(r).toEqual({ message: 'success', attributes_processed: 1, events_processed: 1, purchases_processed: 1 })
    const u = await userWhen('ba-1', (x) => x?.purchases?.length === 1)
    expect(u).toMatchObject({ first_name: 'Grace', email: 'grace@example.com', country: 'US', custom_attributes: { plan: 'pro' } })
    expect(u.custom_events.map((e: any) => [e.name, e.count])).toEqual([['compiled', 1]])
    expect(u.purchases.map((p: any) => [p.name, p.count])).toEqual([['cobol', 1]])
  })

  it('track in bulk (the X-Braze-Bulk header)', async () => {
    const attributes = Array.from({ length: 75 }, (_, i) => ({ external_id: `ba-bulk-${i}`, first_name: `Bulk ${i}` }))
    const r = await braze.users.track({ attributes }, true)
    expect(r).toEqual({ message: 'success', attributes_processed: 75 })
    await userWhen('ba-bulk-74', (u) => u?.first_name === 'Bulk 74')
    // The request's objects are applied partition by partition: the last user there says nothing of the others.
    const firstFifty = () => braze.users.export.ids({ external_ids: attributes.slice(0, 50).map((a) => a.external_id), fields_to_export: ['external_id', 'first_name'] })
    const read = await until('the first fifty users', firstFifty, (r) => r.users.length === 50, 30_000)
    const names = new Map(read.users.map((u) => [u.external_id, u.first_name]))
    for (const a of attributes.slice(0, 50)) expect(names.get(a.external_id)).toBe(a.first_name)
  })

  it('export.ids: by external id, alias, braze_id, email and phone, with fields_to_export', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-x', phone: '+14155552671', email: 'x@example.com', user_alias: undefined } as any] })
    const u = await userWhen('ba-x', (x) => x?.phone === '+14155552671')
    const fields: any = ['external_id', 'braze_id', 'email', 'phone']
    expect((await braze.users.export.ids({ external_ids: ['ba-x', 'nobody'], fields_to_export: fields })).users).toEqual([
      { external_id: 'ba-x', braze_id: u.service_id, email: 'x@example.com', phone: '+14155552671' },
    ])
    expect((await braze.users.export.ids({ braze_id: u.service_id, fields_to_export: ['external_id'] })).users).toEqual([{ external_id: 'ba-x' }])
    expect((await braze.users.export.ids({ email_address: 'X@example.com', fields_to_export: ['external_id'] })).users).toEqual([{ external_id: 'ba-x' }])
    expect((await braze.users.export.ids({ phone: '+14155552671', fields_to_export: ['external_id'] })).users).toEqual([{ external_id: 'ba-x' }])
    const missing = await braze.users.export.ids({ external_ids: ['nobody'] })
    expect(missing.users).toEqual([])
    expect(missing.invalid_user_ids).toEqual(['nobody'])
  })

  it('alias.new, alias.update and identify (aliases, emails and phone numbers)', async () => {
    expect(await braze.users.alias.new({ user_aliases: [{ alias_name: 'anon-a', alias_label: 'web' }] })).toMatchObject({ message: 'success' })
    const byAlias = (alias_name: string) => env.readUsers(ws.key, { user_aliases: [{ alias_name, alias_label: 'web' }] }).then((r) => r.users[0])
    await until('the alias-only user', () => byAlias('anon-a'), (u) => u !== undefined)
    expect(await braze.users.alias.update({ alias_updates: [{ alias_label: 'web', old_alias_name: 'anon-a', new_alias_name: 'anon-b' }] })).toMatchObject({ message: 'success' })
    await until('the renamed alias', () => byAlias('anon-b'), (u) => u !== undefined)
    expect(await byAlias('anon-a')).toBeUndefined()

    await braze.users.track({ attributes: [{ email: 'walkin@example.com', first_name: 'Walk' }, { phone: '+442071838750', first_name: 'Ring' }] as any })
    await until('the email-only and phone-only users', () => env.readUsers(ws.key, { phone: '+442071838750' }), (r) => r.users.length === 1)
    const r = await braze.users.identify({
      aliases_to_identify: [{ external_id: 'ba-anon', user_alias: { alias_name: 'anon-b', alias_label: 'web' } }],
      emails_to_identify: [{ external_id: 'ba-walkin', email: 'walkin@example.com', prioritization: ['unidentified'] }],
      phone_numbers_to_identify: [{ external_id: 'ba-ring', phone: '+442071838750', prioritization: ['unidentified', 'most_recently_updated'] }],
    })
    expect(r).toEqual({ aliases_processed: 3, message: 'success' })
    expect((await userWhen('ba-anon', (u) => u !== undefined)).user_aliases).toEqual([{ alias_name: 'anon-b', alias_label: 'web' }])
    expect((await userWhen('ba-walkin', (u) => u !== undefined)).first_name).toBe('Walk')
    expect((await userWhen('ba-ring', (u) => u !== undefined)).first_name).toBe('Ring')
  })

  it('alias.new on an identified user', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-owner' }] })
    await userWhen('ba-owner', (u) => u !== undefined)
    await braze.users.alias.new({ user_aliases: [{ external_id: 'ba-owner', alias_name: 'crm-1', alias_label: 'crm' }] })
    expect((await userWhen('ba-owner', (u) => u.user_aliases?.length === 1)).user_aliases).toEqual([{ alias_name: 'crm-1', alias_label: 'crm' }])
  })

  it('merge', async () => {
    await braze.users.track({
      attributes: [{ external_id: 'ba-old', first_name: 'Old', legacy: true } as any, { external_id: 'ba-new', last_name: 'New' }],
      events: [{ external_id: 'ba-old', name: 'visited', time: ago(10) }],
    })
    await userWhen('ba-new', (u) => u !== undefined)
    await userWhen('ba-old', (u) => u?.custom_events?.length === 1)
    expect(await braze.users.merge({ merge_updates: [{ identifier_to_merge: { external_id: 'ba-old' }, identifier_to_keep: { external_id: 'ba-new' } }] })).toEqual({ message: 'success' })
    await gone('ba-old')
    const kept = await user('ba-new')
    expect(kept).toMatchObject({ first_name: 'Old', last_name: 'New', custom_attributes: { legacy: true } })
    expect(kept.custom_events.map((e: any) => [e.name, e.count])).toEqual([['visited', 1]])
  })

  it('delete by external id, alias and braze_id', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-del-1' }, { external_id: 'ba-del-2' }, { external_id: 'ba-del-3' }] })
    await braze.users.alias.new({ user_aliases: [{ external_id: 'ba-del-2', alias_name: 'del-2', alias_label: 'crm' }] })
    await userWhen('ba-del-2', (u) => u?.user_aliases?.length === 1)
    const third = await user('ba-del-3')
    expect(await braze.users.delete({ external_ids: ['ba-del-1'] })).toEqual({ message: 'success', deleted: 1 })
    expect(await braze.users.delete({ user_aliases: [{ alias_name: 'del-2', alias_label: 'crm' }] })).toEqual({ message: 'success', deleted: 1 })
    expect(await braze.users.delete({ braze_ids: [third.service_id] })).toEqual({ message: 'success', deleted: 1 })
    await gone('ba-del-1')
    await gone('ba-del-2')
    await gone('ba-del-3')
  })

  it('external_ids.rename and external_ids.remove', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-before', first_name: 'Renamed' }] })
    await userWhen('ba-before', (u) => u !== undefined)
    const rename = await braze.users.external_ids.rename({ external_id_renames: [{ current_external_id: 'ba-before', new_external_id: 'ba-after' }] })
    expect(rename).toEqual({ message: 'success', external_ids: ['ba-before'], rename_errors: [] })
    expect((await user('ba-after')).first_name).toBe('Renamed')
    // The old id still names the user until it is removed.
    expect((await user('ba-before')).external_id).toBe('ba-after')
    const remove = await braze.users.external_ids.remove({ external_ids: ['ba-before'] })
    expect(remove).toEqual({ message: 'success', removed_ids: ['ba-before'], removal_errors: [] })
    expect(await user('ba-before')).toBeUndefined()
    expect((await user('ba-after')).first_name).toBe('Renamed')
  })
})

describe('exports', () => {
  it('export.segment and export.global_control_group write the users to files behind the answered URL', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-exp-1', first_name: 'E1' }, { external_id: 'ba-exp-2', first_name: 'E2' }] })
    await userWhen('ba-exp-2', (u) => u !== undefined)
    const seg = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'ba-everyone', filter: { all: [] } })
    expect(seg.status, seg.text).toBe(201)
    expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/global_control_group`, { percent: 100 })).status).toBe(200)

    const exports = [
      await braze.users.export.segment({ segment_id: seg.body.segment_id, fields_to_export: ['external_id', 'first_name'] }),
      await braze.users.export.global_control_group({ fields_to_export: ['external_id', 'first_name'] }),
    ]
    for (const r of exports) {
      expect(r).toMatchObject({ message: 'success', object_prefix: expect.any(String), url: expect.any(String) })
      const download = await until('the export file', () => fetch(r.url!), (res) => res.status === 200, 60_000, 100)
      const entries = await unzip(Buffer.from(await download.arrayBuffer()))
      const users = [...entries.values()].flatMap((text) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l)))
      expect(users.filter((u) => String(u.external_id).startsWith('ba-exp-')).sort((a, b) => a.external_id.localeCompare(b.external_id))).toEqual([
        { external_id: 'ba-exp-1', first_name: 'E1' },
        { external_id: 'ba-exp-2', first_name: 'E2' },
      ])
    }
  })
})

describe('subscription groups', () => {
  it('status.set, v2 status.set, status.get and user.status', async () => {
    const group = async (name: string, channel: string) => {
      const r = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name, channel })
      expect(r.status, r.text).toBe(201)
      return r.body.subscription_group_id as string
    }
    const state = (id: string) => (u: any) => u?.subscription_groups?.find((g: any) => g.subscription_group_id === id)?.subscription_state
    const news = await group('ba-news', 'email')
    const sms = await group('ba-sms', 'sms')
    await braze.users.track({ attributes: [{ external_id: 'ba-sub-1', email: 'sub1@example.com', phone: '+14155550101' }, { external_id: 'ba-sub-2', email: 'sub2@example.com' }] })
    await userWhen('ba-sub-2', (u) => u !== undefined)

    // The client's type asks for external_id and email (or phone) lists together; each names users.
    expect(await braze.subscription.status.set({ subscription_group_id: news, subscription_state: 'subscribed', external_id: ['ba-sub-1'], email: ['sub2@example.com'] })).toEqual({ message: 'success' })
    await userWhen('ba-sub-1', (u) => state(news)(u) === 'subscribed')
    await userWhen('ba-sub-2', (u) => state(news)(u) === 'subscribed')
    expect(await braze.v2.subscription.status.set({ subscription_groups: [{ subscription_group_id: news, subscription_state: 'unsubscribed', emails: ['sub2@example.com'] }] })).toEqual({ message: 'success' })
    await userWhen('ba-sub-2', (u) => state(news)(u) === 'unsubscribed')
    await braze.v2.subscription.status.set({ subscription_groups: [{ subscription_group_id: sms, subscription_state: 'subscribed', phones: ['+14155550101'] }] })
    await userWhen('ba-sub-1', (u) => state(sms)(u) === 'subscribed')

    // Several users as external_id[]=…&external_id[]=…, the way the client writes a list.
    expect(await braze.subscription.status.get({ subscription_group_id: news, external_id: ['ba-sub-1', 'ba-sub-2'] })).toEqual({
      status: { 'ba-sub-1': 'Subscribed', 'ba-sub-2': 'Unsubscribed' },
      message: 'success',
    })
    expect(await braze.subscription.status.get({ subscription_group_id: sms, phone: '+14155550101' })).toEqual({ status: { '+14155550101': 'Subscribed' }, message: 'success' })

    const listed = await braze.subscription.user.status({ external_id: ['ba-sub-1'], limit: 10, offset: 0 })
    expect(listed.total_count).toBe(1)
    expect(listed.users).toEqual([
      {
        external_id: 'ba-sub-1',
        email: 'sub1@example.com',
        phone: '+14155550101',
        subscription_groups: expect.arrayContaining([
          { id: news, name: 'ba-news', channel: 'email', status: 'Subscribed' },
          { id: sms, name: 'ba-sms', channel: 'sms', status: 'Subscribed' },
        ]),
      },
    ])
  })
})

describe('email', () => {
  it('blacklist unsubscribes the address and lists it hard bounced', async () => {
    await braze.users.track({ attributes: [{ external_id: 'ba-bl', email: 'bl@example.com', email_subscribe: 'subscribed' }] })
    await userWhen('ba-bl', (u) => u?.email_subscribe === 'subscribed')
    expect(await braze.email.blacklist({ email: ['bl@example.com'] })).toEqual({ message: 'success' })
    await userWhen('ba-bl', (u) => u?.email_subscribe === 'unsubscribed')
    const bounced = await env.call('GET', '/email/hard_bounces?email=bl@example.com', { key: ws.key })
    expect(bounced.body.emails.map((e: any) => e.email)).toEqual(['bl@example.com'])
  })

  it('spam.remove and bounce.remove take addresses off those lists', async () => {
    for (const list of ['email_spam_list', 'email_bounce_list']) {
      const r = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/${list}`, { emails: ['listed@example.com', 'stays@example.com'] })
      expect(r.status, r.text).toBe(200)
    }
    expect(await braze.email.spam.remove({ email: 'listed@example.com' })).toMatchObject({ message: 'success' })
    expect(await braze.email.bounce.remove({ email: ['listed@example.com'] })).toMatchObject({ message: 'success' })
    for (const list of ['email_spam_list', 'email_bounce_list']) {
      const r = await env.admin('GET', `/admin/v1/workspaces/${ws.id}/${list}`)
      const emails = r.body.emails.map((e: { email: string }) => e.email)
      expect(emails, list).toContain('stays@example.com')
      expect(emails, list).not.toContain('listed@example.com')
    }
  })
})

describe('errors', () => {
  it('a refused request reaches the caller as the client\'s ResponseError with our message and status', async () => {
    const err = await braze.users.track({ attributes: [{ external_id: '' }] }).catch((e) => e)
    expect(err).toMatchObject({ status: 400, message: expect.stringContaining('external_id') })
    const denied = await new Braze(env.baseUrl, 'not-a-key').users.export.ids({ external_ids: ['x'] }).catch((e) => e)
    expect(denied.status).toBe(401)
  })
})
