import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readSnapshots } from '../../../shared/clickhouse/snapshot-repository.js'
import { Permissions } from '../../../shared/domain/permissions.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

const BOTH_MESSAGE = 'Either an email address or a phone number should be provided, but not both.'

let env: TestEnv
let ws: { id: string; key: string }
let emailGroup: string
let smsGroup: string
let whatsappGroup: string

async function createGroup(workspaceId: string, name: string, channel: string): Promise<string> {
  const g = await env.admin('POST', `/admin/v1/workspaces/${workspaceId}/subscription_groups`, { name, channel })
  expect(g.status, g.text).toBe(201)
  return g.body.subscription_group_id
}

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
  emailGroup = await createGroup(ws.id, 'newsletter', 'email')
  smsGroup = await createGroup(ws.id, 'sms-alerts', 'sms')
  whatsappGroup = await createGroup(ws.id, 'whatsapp-alerts', 'whatsapp')
})
afterAll(async () => {
  await env.close()
})

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`)
const emails = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}@example.com`)
const phones = (n: number) => Array.from({ length: n }, (_, i) => `+1415555${String(1000 + i).padStart(4, '0')}`)

function set(body: unknown, key = ws.key) {
  return env.call('POST', '/subscription/status/set', { key, body })
}

function setV2(body: unknown, key = ws.key) {
  return env.call('POST', '/v2/subscription/status/set', { key, body })
}

async function waitDone(r: { status: number; text: string; headers: Headers }) {
  expect(r.status, r.text).toBe(201)
  const progress = await env.waitForRequest(ws.key, r.headers.get('x-request-id')!)
  expect(progress.status).toBe('done')
}

async function setAndWait(body: unknown) {
  await waitDone(await set(body))
}

const trackAndWait = (body: unknown) => env.writeAndWait(ws.key, '/users/track', body)

/** GET /subscription/status/get with a raw query string. */
async function get(query: string, key = ws.key) {
  return env.call('GET', `/subscription/status/get?${query}`, { key })
}

async function statusOf(query: string): Promise<Record<string, string>> {
  const r = await get(query)
  expect(r.status, r.text).toBe(200)
  expect(r.body.message).toBe('success')
  return r.body.status
}

const q = (name: string, values: string[]) => values.map((v) => `${name}=${encodeURIComponent(v)}`).join('&')

describe('POST /subscription/status/set', () => {
  it('sets a tracked user subscribed then unsubscribed, answering 201 success with a request id', async () => {
    await trackAndWait({ attributes: [{ external_id: 'set-1', first_name: 'Ada' }] })
    const r = await set({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['set-1'] })
    expect(r.status).toBe(201)
    expect(r.body).toEqual({ message: 'success' })
    expect(r.headers.get('x-request-id')).toBeTruthy()
    await waitDone(r)
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=set-1`)).toEqual({ 'set-1': 'Subscribed' })

    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'unsubscribed', external_id: ['set-1'] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=set-1`)).toEqual({ 'set-1': 'Unsubscribed' })
  })

  it('shows the new state in the stored profile record and its ClickHouse snapshot', async () => {
    await trackAndWait({ attributes: [{ external_id: 'set-snap', email: 'snap@example.com' }] })
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['set-snap'] })
    const read = await env.call('POST', '/users/export/ids', { key: ws.key, body: { external_ids: ['set-snap'] } })
    expect(read.body.users[0].subscription_groups).toEqual([{ subscription_group_id: emailGroup, subscription_state: 'subscribed' }])
    const { rows } = await env.ctx.pg.query('SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, 'set-snap'])
    const snap = await readSnapshots(env.clickhouse, ws.id, [rows[0].id])
    expect(snap.get(rows[0].id)?.subscription_groups).toEqual([{ subscription_group_id: emailGroup, subscription_state: 'subscribed' }])
  })

  it('ignores an external id no profile has: no profile is created and the read stays Unknown', async () => {
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['nobody-here'] })
    const { rows } = await env.ctx.pg.query('SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, 'nobody-here'])
    expect(rows).toHaveLength(0)
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=nobody-here`)).toEqual({ 'nobody-here': 'Unknown' })
  })

  it('updates every profile sharing an email', async () => {
    await trackAndWait({
      attributes: [
        { external_id: 'share-a', email: 'shared@example.com' },
        { external_id: 'share-b', email: 'Shared@Example.com' },
      ],
    })
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', email: ['SHARED@example.com'] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=share-a&external_id[]=share-b`)).toEqual({
      'share-a': 'Subscribed',
      'share-b': 'Subscribed',
    })
  })

  it('keeps a state set for an email nobody has, and applies it to a profile created later with that email', async () => {
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'unsubscribed', email: 'later@example.com' })
    expect(await statusOf(`subscription_group_id=${emailGroup}&email=later@example.com`)).toEqual({ 'later@example.com': 'Unsubscribed' })

    await trackAndWait({ attributes: [{ external_id: 'later-user', email: 'Later@Example.com' }] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=later-user`)).toEqual({ 'later-user': 'Unsubscribed' })
  })

  it('keeps a state set for a phone nobody has, and applies it when an existing user gets that phone', async () => {
    const phone = '+14155550199'
    await setAndWait({ subscription_group_id: smsGroup, subscription_state: 'subscribed', phone: [phone] })
    await trackAndWait({ attributes: [{ external_id: 'phone-later', first_name: 'Grace' }] })
    expect(await statusOf(`subscription_group_id=${smsGroup}&external_id[]=phone-later`)).toEqual({ 'phone-later': 'Unknown' })
    await trackAndWait({ attributes: [{ external_id: 'phone-later', phone }] })
    expect(await statusOf(`subscription_group_id=${smsGroup}&external_id[]=phone-later`)).toEqual({ 'phone-later': 'Subscribed' })
  })

  it('accepts phones for WhatsApp groups and normalizes them to E.164', async () => {
    await trackAndWait({ attributes: [{ external_id: 'wa-1', phone: '+1 (415) 555-0142' }] })
    await setAndWait({ subscription_group_id: whatsappGroup, subscription_state: 'subscribed', phone: ['+1 415 555 0142'] })
    expect(await statusOf(`subscription_group_id=${whatsappGroup}&external_id[]=wa-1`)).toEqual({ 'wa-1': 'Subscribed' })
  })

  it('lets the last accepted write win across /users/track subscription_groups and status set for one user', async () => {
    await trackAndWait({ attributes: [{ external_id: 'order-1' }] })
    const viaTrack = (state: string) =>
      env.call('POST', '/users/track', {
        key: ws.key,
        body: { attributes: [{ external_id: 'order-1', subscription_groups: [{ subscription_group_id: emailGroup, subscription_state: state }] }] },
      })
    const viaSet = (state: string) => set({ subscription_group_id: emailGroup, subscription_state: state, external_id: ['order-1'] })

    // Accepted one after another without waiting: the worker must apply them in this order.
    const first = [await viaTrack('subscribed'), await viaSet('unsubscribed'), await viaTrack('subscribed'), await viaSet('unsubscribed')]
    for (const r of first) await waitDone(r)
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=order-1`)).toEqual({ 'order-1': 'Unsubscribed' })

    const second = [await viaSet('unsubscribed'), await viaTrack('unsubscribed'), await viaSet('subscribed'), await viaTrack('subscribed')]
    for (const r of second) await waitDone(r)
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=order-1`)).toEqual({ 'order-1': 'Subscribed' })
  })

  it('refuses 51 external ids, emails or phones with a message naming the field; 50 are accepted', async () => {
    const tooMany = [
      { external_id: ids('x', 51), field: 'external_id' },
      { email: emails('e', 51), field: 'email' },
    ]
    for (const { field, ...keys } of tooMany) {
      const r = await set({ subscription_group_id: emailGroup, subscription_state: 'subscribed', ...keys })
      expect(r.status).toBe(400)
      expect(r.body.message).toBe(`${field}: must hold at most 50 ${field === 'email' ? 'email addresses' : 'external ids'} per request`)
    }
    const phonesRefused = await set({ subscription_group_id: smsGroup, subscription_state: 'subscribed', phone: phones(51) })
    expect(phonesRefused.status).toBe(400)
    expect(phonesRefused.body.message).toBe('phone: must hold at most 50 phone numbers per request')

    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ids('x', 50), email: emails('e', 50) })
    await setAndWait({ subscription_group_id: smsGroup, subscription_state: 'subscribed', phone: phones(50) })
    const status = await statusOf(`subscription_group_id=${emailGroup}&${q('email', emails('e', 50))}`)
    expect(Object.keys(status)).toHaveLength(50)
    expect(new Set(Object.values(status))).toEqual(new Set(['Subscribed']))
  })

  it('refuses email and phone together with the exact message, whatever else is sent', async () => {
    for (const extra of [{}, { external_id: ['set-1'] }, { email: 'not-an-email', phone: 'nope' }]) {
      const r = await set({ subscription_group_id: emailGroup, subscription_state: 'subscribed', email: ['a@example.com'], phone: ['+14155550100'], ...extra })
      expect(r.status).toBe(400)
      expect(r.body.message).toBe(BOTH_MESSAGE)
    }
  })

  it('refuses an unknown group, a group of another workspace and a channel mismatch with 400', async () => {
    const unknown = await set({ subscription_group_id: 'no-such-group', subscription_state: 'subscribed', external_id: ['set-1'] })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toBe('subscription_group_id: unknown subscription group no-such-group')

    const other = await env.workspace()
    const foreign = await createGroup(other.id, 'theirs', 'email')
    const cross = await set({ subscription_group_id: foreign, subscription_state: 'subscribed', external_id: ['set-1'] })
    expect(cross.status).toBe(400)
    expect(cross.body.message).toMatch(/^subscription_group_id: unknown subscription group/)

    const phoneForEmail = await set({ subscription_group_id: emailGroup, subscription_state: 'subscribed', phone: ['+14155550100'] })
    expect(phoneForEmail.status).toBe(400)
    expect(phoneForEmail.body.message).toMatch(/^phone: subscription group .* is an email group; send external_id or email$/)

    const emailForSms = await set({ subscription_group_id: smsGroup, subscription_state: 'subscribed', email: ['a@example.com'] })
    expect(emailForSms.status).toBe(400)
    expect(emailForSms.body.message).toMatch(/^email: subscription group .* is an sms group; send external_id or phone$/)
  })

  it('validates the body with messages naming the field', async () => {
    const cases: [unknown, RegExp][] = [
      [{ subscription_state: 'subscribed', external_id: ['a'] }, /^subscription_group_id:/],
      [{ subscription_group_id: emailGroup, subscription_state: 'maybe', external_id: ['a'] }, /^subscription_state:/],
      [{ subscription_group_id: emailGroup, subscription_state: 'subscribed' }, /^external_id: external_id or email is required/],
      [{ subscription_group_id: smsGroup, subscription_state: 'subscribed', external_id: [] }, /^external_id: external_id or phone is required/],
      [{ subscription_group_id: emailGroup, subscription_state: 'subscribed', email: ['ok@example.com', 'broken'] }, /^email\.1: must be a valid email address$/],
      [{ subscription_group_id: smsGroup, subscription_state: 'subscribed', phone: ['12'] }, /^phone\.0: must be a valid phone number/],
      [{ subscription_group_id: emailGroup, subscription_state: 'subscribed', email: [] }, /^email: must hold at least 1/],
      [{ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_ids: ['a'] }, /external_ids/],
    ]
    for (const [body, message] of cases) {
      const r = await set(body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.message).toMatch(message)
    }
  })
})

describe('POST /v2/subscription/status/set', () => {
  it('sets several groups in one request and answers 201 success', async () => {
    await trackAndWait({ attributes: [{ external_id: 'v2-a' }, { external_id: 'v2-b' }, { external_id: 'v2-c', phone: '+14155550111' }] })
    const r = await setV2({
      subscription_groups: [
        { subscription_group_id: emailGroup, subscription_state: 'subscribed', external_ids: ['v2-a', 'v2-b'] },
        { subscription_group_id: smsGroup, subscription_state: 'unsubscribed', external_ids: ['v2-a'] },
        { subscription_group_id: smsGroup, subscription_state: 'subscribed', external_ids: ['v2-a'] },
        { subscription_group_id: smsGroup, subscription_state: 'subscribed', phones: ['+1 415 555 0111'] },
      ],
    })
    expect(r.body).toEqual({ message: 'success' })
    await waitDone(r)
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=v2-a&external_id[]=v2-b`)).toEqual({
      'v2-a': 'Subscribed',
      'v2-b': 'Subscribed',
    })
    // For one user key, the later entry of the request wins.
    expect(await statusOf(`subscription_group_id=${smsGroup}&external_id[]=v2-a&external_id[]=v2-c`)).toEqual({
      'v2-a': 'Subscribed',
      'v2-c': 'Subscribed',
    })
  })

  it('refuses 51 ids in an entry, 26 entries, email and phone together, and an unknown group', async () => {
    const many = await setV2({ subscription_groups: [{ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_ids: ids('v', 51) }] })
    expect(many.status).toBe(400)
    expect(many.body.message).toBe('subscription_groups.0.external_ids: must hold at most 50 external ids per request')

    const entry = { subscription_group_id: emailGroup, subscription_state: 'subscribed', external_ids: ['v2-a'] }
    const entries = await setV2({ subscription_groups: Array.from({ length: 26 }, () => entry) })
    expect(entries.status).toBe(400)
    expect(entries.body.message).toBe('subscription_groups: must hold at most 25 subscription groups per request')

    const both = await setV2({ subscription_groups: [{ ...entry, emails: ['a@example.com'], phones: ['+14155550100'] }] })
    expect(both.status).toBe(400)
    expect(both.body.message).toBe(BOTH_MESSAGE)

    const unknown = await setV2({ subscription_groups: [entry, { ...entry, subscription_group_id: 'nope' }] })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toBe('subscription_groups.1.subscription_group_id: unknown subscription group nope')

    const mismatch = await setV2({ subscription_groups: [{ subscription_group_id: smsGroup, subscription_state: 'subscribed', emails: ['a@example.com'] }] })
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.message).toMatch(/^subscription_groups\.0\.emails: subscription group .* is an sms group/)
  })
})

describe('GET /subscription/status/get', () => {
  it('answers Unknown for users and addresses never set', async () => {
    await trackAndWait({ attributes: [{ external_id: 'never-set', email: 'never@example.com' }] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=never-set&external_id[]=no-such-user`)).toEqual({
      'never-set': 'Unknown',
      'no-such-user': 'Unknown',
    })
    expect(await statusOf(`subscription_group_id=${emailGroup}&email=never@example.com`)).toEqual({ 'never@example.com': 'Unknown' })
    expect(await statusOf(`subscription_group_id=${smsGroup}&phone=%2B14155550123`)).toEqual({ '+14155550123': 'Unknown' })
  })

  it('takes email as a string or an array and answers under the keys as sent', async () => {
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', email: ['forms@example.com'] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&email=Forms@Example.com`)).toEqual({ 'Forms@Example.com': 'Subscribed' })
    expect(await statusOf(`subscription_group_id=${emailGroup}&email[]=forms@example.com&email[]=other@example.com`)).toEqual({
      'forms@example.com': 'Subscribed',
      'other@example.com': 'Unknown',
    })
  })

  it('uses only external_id when email or phone are sent too; email and phone alone together are refused', async () => {
    await trackAndWait({ attributes: [{ external_id: 'wins' }] })
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['wins'] })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=wins&email=whatever@example.com&phone=%2B14155550100`)).toEqual({
      wins: 'Subscribed',
    })
    expect(await statusOf(`subscription_group_id=${emailGroup}&external_id[]=wins&email=broken&${q('email', emails('w', 51))}`)).toEqual({
      wins: 'Subscribed',
    })
    const both = await get(`subscription_group_id=${emailGroup}&email=a@example.com&phone=%2B14155550100`)
    expect(both.status).toBe(400)
    expect(both.body.message).toBe(BOTH_MESSAGE)
  })

  it('accepts 50 keys in every list form and refuses 51 with a message naming the field', async () => {
    const fifty = ids('g', 50)
    const bracket = await statusOf(`subscription_group_id=${emailGroup}&${fifty.map((id) => `external_id[]=${id}`).join('&')}`)
    expect(Object.keys(bracket)).toEqual(fifty)
    const repeated = await statusOf(`subscription_group_id=${emailGroup}&${q('email', emails('g', 50))}`)
    expect(Object.keys(repeated)).toHaveLength(50)
    const phoneStatus = await statusOf(`subscription_group_id=${smsGroup}&${q('phone', phones(50))}`)
    expect(Object.keys(phoneStatus)).toHaveLength(50)

    const refusals: [string, string][] = [
      [`subscription_group_id=${emailGroup}&${ids('g', 51).map((id) => `external_id[]=${id}`).join('&')}`, 'external_id: must hold at most 50 external ids per request'],
      [`subscription_group_id=${emailGroup}&${q('email', emails('g', 51))}`, 'email: must hold at most 50 email addresses per request'],
      [`subscription_group_id=${smsGroup}&${q('phone', phones(51))}`, 'phone: must hold at most 50 phone numbers per request'],
    ]
    for (const [query, message] of refusals) {
      const r = await get(query)
      expect(r.status).toBe(400)
      expect(r.body.message).toBe(message)
    }
  })

  it('refuses a missing or unknown group, no keys, a bad address and a channel mismatch', async () => {
    const cases: [string, string | RegExp][] = [
      ['external_id[]=a', /^subscription_group_id:/],
      ['subscription_group_id=nope&external_id[]=a', 'subscription_group_id: unknown subscription group nope'],
      [`subscription_group_id=${emailGroup}`, 'external_id: one of external_id, email or phone is required'],
      [`subscription_group_id=${emailGroup}&email=broken`, 'email.0: must be a valid email address'],
      [`subscription_group_id=${smsGroup}&phone=12`, /^phone\.0: must be a valid phone number/],
      [`subscription_group_id=${emailGroup}&phone=%2B14155550100`, /^phone: subscription group .* is an email group/],
      [`subscription_group_id=${smsGroup}&email=a@example.com`, /^email: subscription group .* is an sms group/],
    ]
    for (const [query, message] of cases) {
      const r = await get(query)
      expect(r.status, query).toBe(400)
      expect(r.body.message).toMatch(message)
    }
  })
})

describe('permissions', () => {
  it('answers 403 to a key lacking the endpoint permission', async () => {
    const withoutSet = await env.workspace(Permissions.filter((p) => p !== 'subscription.status.set'))
    const withoutGet = await env.workspace(Permissions.filter((p) => p !== 'subscription.status.get'))
    const body = { subscription_group_id: 'g', subscription_state: 'subscribed', external_id: ['a'] }
    for (const r of [
      await set(body, withoutSet.key),
      await setV2({ subscription_groups: [body] }, withoutSet.key),
      await get('subscription_group_id=g&external_id[]=a', withoutGet.key),
    ]) {
      expect(r.status).toBe(403)
      expect(r.body.message).toMatch(/lacks the permission subscription\.status\.(set|get)/)
    }
    expect((await get('subscription_group_id=g&external_id[]=a', withoutSet.key)).status).toBe(400)
  })
})

describe('GET /subscription/user/status', () => {
  const userStatus = (query: string, key = ws.key) => env.call('GET', `/subscription/user/status?${query}`, { key })

  it("lists each user's groups with their states, by external id, email or phone, one page at a time", async () => {
    await trackAndWait({
      attributes: [
        { external_id: 'us-1', email: 'us-shared@example.com', phone: '+14155550901' },
        { external_id: 'us-2', email: 'us-shared@example.com' },
        { external_id: 'us-3' },
      ],
    })
    await setAndWait({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['us-1', 'us-2'] })
    await setAndWait({ subscription_group_id: smsGroup, subscription_state: 'unsubscribed', external_id: ['us-1'] })

    const byId = await userStatus('external_id=us-1')
    expect(byId.status, byId.text).toBe(200)
    expect(byId.body).toEqual({
      users: [
        {
          email: 'us-shared@example.com',
          phone: '+14155550901',
          external_id: 'us-1',
          subscription_groups: [
            { id: emailGroup, name: 'newsletter', channel: 'email', status: 'Subscribed' },
            { id: smsGroup, name: 'sms-alerts', channel: 'sms', status: 'Unsubscribed' },
          ],
        },
      ],
      total_count: 1,
      message: 'success',
    })
    // Users sharing an email are each listed; a user with no state has no groups.
    const byEmail = await userStatus('email=US-Shared@example.com')
    expect(byEmail.body.users.map((u: any) => u.external_id).sort()).toEqual(['us-1', 'us-2'])
    // Pages follow one stable order (profile creation), so two pages hold every user once.
    const page = (offset: number) => userStatus(`external_id[]=us-1&external_id[]=us-2&external_id[]=us-3&limit=2&offset=${offset}`)
    const [first, second] = [await page(0), await page(2)]
    expect(first.body.total_count).toBe(3)
    expect(second.body.users).toHaveLength(1)
    const listed = [...first.body.users, ...second.body.users].map((u: any) => [u.external_id, u.subscription_groups.length])
    expect(listed.sort()).toEqual([
      ['us-1', 2],
      ['us-2', 1],
      ['us-3', 0],
    ])
    expect((await userStatus(`phone=${encodeURIComponent('+1 415 555 0901')}`)).body.users.map((u: any) => u.external_id)).toEqual(['us-1'])
  })

  it('refuses no key, 51 keys and a page over 100, and needs subscription.groups.get', async () => {
    expect((await userStatus('limit=5')).body.message).toBe('external_id: send external_id, email or phone (1 to 50 of them)')
    expect((await userStatus(q('external_id', ids('x', 51)))).body.message).toBe('external_id: must hold at most 50 external ids per request')
    expect((await userStatus('external_id=a&limit=101')).body.message).toBe('limit: must be at most 100')
    const other = await env.workspace(['subscription.status.get'])
    expect((await userStatus('external_id=a', other.key)).status).toBe(403)
  })
})
