import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { errorHandler } from '../../../services/api/middleware/errors.js'
import { mountFamily, type AuthMiddleware } from '../../../services/api/mount.js'
import { emailRoutes, type EmailDeps } from '../../../services/api/routes/email.js'
import type { EmailProviderLists } from '../../../shared/domain/email-provider.js'
import { Permissions } from '../../../shared/domain/permissions.js'
import { request, startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

async function waitDone(r: { status: number; text: string; headers: Headers }, key = ws.key) {
  expect(r.status, r.text).toBe(201)
  const progress = await env.waitForRequest(key, r.headers.get('x-request-id')!)
  expect(progress.status).toBe('done')
}

const trackAndWait = (body: unknown) => env.writeAndWait(ws.key, '/users/track', body)

async function emailStatusAndWait(email: string, state: string) {
  const r = await env.call('POST', '/email/status', { key: ws.key, body: { email, subscription_state: state } })
  expect(r.body).toEqual({ message: 'success' })
  await waitDone(r)
}

/** email_subscribe of each user having the address, by external id. */
async function emailSubscribeOf(email: string): Promise<Record<string, string | undefined>> {
  const r = await env.call('POST', '/users/export/ids', { key: ws.key, body: { email_address: email, fields_to_export: ['external_id', 'email_subscribe'] } })
  expect(r.status, r.text).toBe(201)
  return Object.fromEntries(r.body.users.map((u: { external_id: string; email_subscribe?: string }) => [u.external_id, u.email_subscribe]))
}

async function listed(workspaceId: string, list: 'email_spam_list' | 'email_bounce_list'): Promise<string[]> {
  const r = await env.admin('GET', `/admin/v1/workspaces/${workspaceId}/${list}`)
  expect(r.status, r.text).toBe(200)
  return r.body.emails.map((e: { email: string }) => e.email)
}

async function addToList(workspaceId: string, list: 'email_spam_list' | 'email_bounce_list', emails: string[]) {
  const r = await env.admin('POST', `/admin/v1/workspaces/${workspaceId}/${list}`, { emails })
  expect(r.status, r.text).toBe(200)
  return r.body
}

describe('POST /email/status', () => {
  it('sets email_subscribe on every user having the address', async () => {
    await trackAndWait({
      attributes: [
        { external_id: 'es-a', email: 'both@example.com' },
        { external_id: 'es-b', email: 'BOTH@example.com' },
        { external_id: 'es-c', email: 'other@example.com' },
      ],
    })
    await emailStatusAndWait('Both@Example.com', 'unsubscribed')
    expect(await emailSubscribeOf('both@example.com')).toEqual({ 'es-a': 'unsubscribed', 'es-b': 'unsubscribed' })
    expect(await emailSubscribeOf('other@example.com')).toEqual({ 'es-c': undefined })

    await emailStatusAndWait('both@example.com', 'opted_in')
    expect(await emailSubscribeOf('both@example.com')).toEqual({ 'es-a': 'opted_in', 'es-b': 'opted_in' })
  })

  it('keeps the state of an address no user has and applies it when a user gets the address', async () => {
    await emailStatusAndWait('nobody-yet@example.com', 'unsubscribed')
    const stored = await env.ctx.pg.query('SELECT state FROM email_states WHERE workspace_id = $1 AND email = $2', [ws.id, 'nobody-yet@example.com'])
    expect(stored.rows).toEqual([{ state: 'unsubscribed' }])

    await trackAndWait({ attributes: [{ external_id: 'tied-new', email: 'Nobody-Yet@example.com' }] })
    expect(await emailSubscribeOf('nobody-yet@example.com')).toEqual({ 'tied-new': 'unsubscribed' })
  })

  it('applies a stored state to an existing user whose email changes to the address', async () => {
    await trackAndWait({ attributes: [{ external_id: 'tied-existing', email: 'before@example.com' }] })
    await emailStatusAndWait('after@example.com', 'subscribed')
    await trackAndWait({ attributes: [{ external_id: 'tied-existing', email: 'after@example.com' }] })
    expect(await emailSubscribeOf('after@example.com')).toEqual({ 'tied-existing': 'subscribed' })
  })

  it('takes an array of up to 50 addresses and applies each as if sent alone', async () => {
    await trackAndWait({
      attributes: [
        { external_id: 'arr-a', email: 'arr-a@example.com' },
        { external_id: 'arr-b', email: 'ARR-B@example.com' },
        { external_id: 'arr-c', email: 'arr-c@example.com' },
      ],
    })
    const r = await env.call('POST', '/email/status', {
      key: ws.key,
      body: { email: ['arr-a@example.com', 'Arr-B@example.com', 'arr-untied@example.com'], subscription_state: 'unsubscribed' },
    })
    expect(r.body).toEqual({ message: 'success' })
    await waitDone(r)
    expect(await emailSubscribeOf('arr-a@example.com')).toEqual({ 'arr-a': 'unsubscribed' })
    expect(await emailSubscribeOf('arr-b@example.com')).toEqual({ 'arr-b': 'unsubscribed' })
    expect(await emailSubscribeOf('arr-c@example.com')).toEqual({ 'arr-c': undefined })
    const stored = await env.ctx.pg.query('SELECT state FROM email_states WHERE workspace_id = $1 AND email = $2', [ws.id, 'arr-untied@example.com'])
    expect(stored.rows).toEqual([{ state: 'unsubscribed' }])

    const fifty = Array.from({ length: 50 }, (_, i) => `status-bulk${i}@example.com`)
    const many = await env.call('POST', '/email/status', { key: ws.key, body: { email: fifty, subscription_state: 'opted_in' } })
    await waitDone(many)
    const states = await env.ctx.pg.query('SELECT count(*)::int AS n FROM email_states WHERE workspace_id = $1 AND email = ANY($2) AND state = $3', [ws.id, fifty, 'opted_in'])
    expect(states.rows[0].n).toBe(50)
  })

  it('validates the body with messages naming the field', async () => {
    const fiftyOne = Array.from({ length: 51 }, (_, i) => `over${i}@example.com`)
    const cases: [unknown, RegExp][] = [
      // A single address is a list of one, so its error names email.0, as /email/spam/remove answers.
      [{ email: 'broken', subscription_state: 'subscribed' }, /^email.0: must be a valid email address$/],
      [{ email: fiftyOne, subscription_state: 'subscribed' }, /^email: must hold at most 50 email addresses per request$/],
      [{ email: ['a@example.com', 'broken'], subscription_state: 'subscribed' }, /^email\.1: must be a valid email address$/],
      [{ email: [], subscription_state: 'subscribed' }, /^email: must hold at least 1 email addresses$/],
      [{ email: 'a@example.com', subscription_state: 'maybe' }, /^subscription_state:/],
      [{ subscription_state: 'subscribed' }, /^email:/],
    ]
    for (const [body, message] of cases) {
      const r = await env.call('POST', '/email/status', { key: ws.key, body })
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.message).toMatch(message)
    }
    const refused = await env.ctx.pg.query('SELECT email FROM email_states WHERE workspace_id = $1 AND email = ANY($2)', [ws.id, [...fiftyOne, 'a@example.com']])
    expect(refused.rows).toEqual([])
  })
})

describe('spam and bounce lists', () => {
  it('removes one address or up to 50 from the spam list, reporting which were listed', async () => {
    const added = await addToList(ws.id, 'email_spam_list', ['Spam1@example.com', 'spam2@example.com', 'spam3@example.com', 'spam1@example.com'])
    expect(added).toEqual({ added: 3, emails: ['spam1@example.com', 'spam2@example.com', 'spam3@example.com'] })
    expect((await addToList(ws.id, 'email_spam_list', ['spam1@example.com'])).added).toBe(0)

    const one = await env.call('POST', '/email/spam/remove', { key: ws.key, body: { email: 'SPAM1@example.com' } })
    expect(one.status).toBe(201)
    expect(one.body).toEqual({ message: 'success', removed: ['spam1@example.com'] })
    expect(await listed(ws.id, 'email_spam_list')).toEqual(['spam2@example.com', 'spam3@example.com'])

    const many = await env.call('POST', '/email/spam/remove', { key: ws.key, body: { email: ['spam3@example.com', 'never-listed@example.com'] } })
    expect(many.body).toEqual({ message: 'success', removed: ['spam3@example.com'] })
    expect(await listed(ws.id, 'email_spam_list')).toEqual(['spam2@example.com'])
    await waitDone(many)
  })

  it('refuses 51 addresses with a message naming the field; 50 are accepted', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => `bulk${i}@example.com`)
    await addToList(ws.id, 'email_spam_list', fifty)
    const refused = await env.call('POST', '/email/spam/remove', { key: ws.key, body: { email: [...fifty, 'one-more@example.com'] } })
    expect(refused.status).toBe(400)
    expect(refused.body.message).toBe('email: must hold at most 50 email addresses per request')
    const bad = await env.call('POST', '/email/spam/remove', { key: ws.key, body: { email: ['ok@example.com', 'broken'] } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toBe('email.1: must be a valid email address')

    const accepted = await env.call('POST', '/email/spam/remove', { key: ws.key, body: { email: fifty } })
    expect(accepted.status).toBe(201)
    expect(accepted.body.removed).toHaveLength(50)
    expect(await listed(ws.id, 'email_spam_list')).not.toContain('bulk0@example.com')
  })

  it('removes from the bounce list of the calling workspace only', async () => {
    const other = await env.workspace()
    await addToList(ws.id, 'email_bounce_list', ['bounced@example.com', 'kept@example.com'])
    await addToList(other.id, 'email_bounce_list', ['bounced@example.com'])

    const r = await env.call('POST', '/email/bounce/remove', { key: ws.key, body: { email: 'bounced@example.com' } })
    expect(r.status).toBe(201)
    expect(r.body).toEqual({ message: 'success', removed: ['bounced@example.com'] })
    expect(await listed(ws.id, 'email_bounce_list')).toEqual(['kept@example.com'])
    expect(await listed(other.id, 'email_bounce_list')).toEqual(['bounced@example.com'])

    const again = await env.call('POST', '/email/bounce/remove', { key: ws.key, body: { email: ['bounced@example.com'] } })
    expect(again.body).toEqual({ message: 'success', removed: [] })
  })

  it('lets the operator page through a list, and refuses bad input, a bad token and an unknown workspace', async () => {
    const other = await env.workspace()
    await addToList(other.id, 'email_spam_list', ['c@example.com', 'a@example.com', 'b@example.com'])
    const first = await env.admin('GET', `/admin/v1/workspaces/${other.id}/email_spam_list?limit=2`)
    expect(first.body.emails.map((e: { email: string }) => e.email)).toEqual(['a@example.com', 'b@example.com'])
    expect(first.body.emails[0].added_at).toMatch(/^\d{4}-\d{2}-\d{2}T/)
    expect(first.body.next_after).toBe('b@example.com')
    const rest = await env.admin('GET', `/admin/v1/workspaces/${other.id}/email_spam_list?limit=2&after=b@example.com`)
    expect(rest.body).toEqual({ emails: [{ email: 'c@example.com', added_at: expect.any(String) }] })

    const bad = await env.admin('POST', `/admin/v1/workspaces/${other.id}/email_bounce_list`, { emails: ['ok@example.com', 'broken'] })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toBe('emails.1: must be a valid email address')
    expect((await env.admin('POST', `/admin/v1/workspaces/${other.id}/email_bounce_list`, { emails: [] })).status).toBe(400)
    expect((await env.admin('POST', '/admin/v1/workspaces/nope/email_spam_list', { emails: ['a@example.com'] })).status).toBe(404)
    expect((await env.admin('GET', '/admin/v1/workspaces/nope/email_bounce_list')).status).toBe(404)
    const noToken = await request(env.baseUrl, 'GET', `/admin/v1/workspaces/${other.id}/email_spam_list`)
    expect(noToken.status).toBe(401)
  })
})

describe('the email provider hook', () => {
  /** The email routes alone, on this test's database and queues, with a provider we can watch. */
  async function appWith(provider: EmailProviderLists) {
    const pass: express.RequestHandler = (_req, _res, next) => next()
    const auth: AuthMiddleware = {
      apiKey: (_req, res, next) => {
        res.locals.auth = { workspaceId: ws.id, keyId: 'test', permissions: new Set(Permissions), generation: '' }
        res.locals.requestId = randomUUID()
        next()
      },
      rateLimit: () => pass,
      write: [],
      admin: pass,
      scim: [],
    }
    const deps: EmailDeps = { pg: env.ctx.pg, producer: { queues: env.ctx.queues, tracker: env.ctx.tracker }, emailProvider: provider }
    const app = express().use(express.json()).use(mountFamily(emailRoutes, deps, auth)).use(errorHandler(env.ctx.logger))
    const server = app.listen(0, '127.0.0.1')
    await new Promise<void>((r) => server.once('listening', () => r()))
    return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((r) => server.close(() => r())) }
  }

  it('passes every requested address, listed or not, to the provider after our own list', async () => {
    const calls: [string, string[]][] = []
    const app = await appWith({
      removeFromSpamList: async (emails) => void calls.push(['spam', emails]),
      removeFromBounceList: async (emails) => void calls.push(['bounce', emails]),
    })
    try {
      await addToList(ws.id, 'email_spam_list', ['hook@example.com'])
      const r = await request(app.baseUrl, 'POST', '/email/spam/remove', { body: { email: ['Hook@example.com', 'unlisted@example.com', 'hook@example.com'] } })
      expect(r.body).toEqual({ message: 'success', removed: ['hook@example.com'] })
      await request(app.baseUrl, 'POST', '/email/bounce/remove', { body: { email: 'b@example.com' } })
      expect(calls).toEqual([
        ['spam', ['hook@example.com', 'unlisted@example.com']],
        ['bounce', ['b@example.com']],
      ])
    } finally {
      await app.close()
    }
  })

  it('answers 502 when the provider fails, after removing from our own list', async () => {
    const failing = async () => {
      throw new Error('provider down')
    }
    const app = await appWith({ removeFromSpamList: failing, removeFromBounceList: failing })
    try {
      await addToList(ws.id, 'email_bounce_list', ['fails@example.com'])
      const r = await request(app.baseUrl, 'POST', '/email/bounce/remove', { body: { email: 'fails@example.com' } })
      expect(r.status).toBe(502)
      expect(r.body.message).toMatch(/email provider's bounce list could not be updated: provider down/)
      expect(r.body.removed).toEqual(['fails@example.com'])
      expect(await listed(ws.id, 'email_bounce_list')).not.toContain('fails@example.com')
    } finally {
      await app.close()
    }
  })
})

describe('permissions', () => {
  it('answers 403 to a key lacking the endpoint permission', async () => {
    const cases = [
      ['email.status', '/email/status', { email: 'a@example.com', subscription_state: 'subscribed' }],
      ['email.spam.remove', '/email/spam/remove', { email: 'a@example.com' }],
      ['email.bounce.remove', '/email/bounce/remove', { email: 'a@example.com' }],
    ] as const
    for (const [permission, path, body] of cases) {
      const lacking = await env.workspace(Permissions.filter((p) => p !== permission))
      const r = await env.call('POST', path, { key: lacking.key, body })
      expect(r.status, path).toBe(403)
      expect(r.body.message).toBe(`this API key lacks the permission ${permission}`)
      const holding = await env.workspace([permission])
      expect((await env.call('POST', path, { key: holding.key, body })).status, path).toBe(201)
    }
  })
})

describe('POST /email/blocklist and /email/blacklist', () => {
  it('unsubscribes the address and lists it hard bounced, for a profile having it now and one getting it later', async () => {
    const w = await env.workspace()
    await env.writeAndWait(w.key, '/users/track', { attributes: [{ external_id: 'bl-1', email: 'bl1@example.com', email_subscribe: 'subscribed' }] })
    for (const path of ['/email/blocklist', '/email/blacklist']) {
      const email = path === '/email/blocklist' ? 'BL1@example.com' : ['bl2@example.com']
      const r = await env.call('POST', path, { key: w.key, body: { email } })
      expect(r.status, r.text).toBe(201)
      expect(r.body).toEqual({ message: 'success' })
      await env.waitForRequest(w.key, r.headers.get('x-request-id')!)
    }
    const read = (email: string) => env.readUsers(w.key, { email_address: email, fields_to_export: ['external_id', 'email_subscribe'] })
    expect((await read('bl1@example.com')).users).toEqual([{ external_id: 'bl-1', email_subscribe: 'unsubscribed' }])
    await env.writeAndWait(w.key, '/users/track', { attributes: [{ external_id: 'bl-2', email: 'bl2@example.com' }] })
    expect((await read('bl2@example.com')).users).toEqual([{ external_id: 'bl-2', email_subscribe: 'unsubscribed' }])
    const bounced = await env.call('GET', '/email/hard_bounces?email=bl1@example.com&email=bl2@example.com', { key: w.key })
    expect(bounced.body.emails.map((e: any) => e.email).sort()).toEqual(['bl1@example.com', 'bl2@example.com'])
    const other = await env.workspace(['email.status'])
    expect((await env.call('POST', '/email/blacklist', { key: other.key, body: { email: 'x@example.com' } })).status).toBe(403)
  })
})

describe('GET /email/hard_bounces and /email/unsubscribes', () => {
  const today = new Date().toISOString().slice(0, 10)
  const days = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10)

  it('lists bounces of a date range newest first, pages them, and answers by address', async () => {
    const w = await env.workspace()
    const bounce = (emails: string[]) => env.admin('POST', `/admin/v1/workspaces/${w.id}/email_bounce_list`, { emails })
    expect((await bounce(['hb1@example.com'])).status).toBe(200)
    await new Promise((r) => setTimeout(r, 20))
    await bounce(['hb2@example.com'])
    const list = (query: string) => env.call('GET', `/email/hard_bounces?${query}`, { key: w.key })
    const all = await list(`start_date=${today}&end_date=${today}`)
    expect(all.status, all.text).toBe(200)
    expect(all.body.message).toBe('success')
    expect(all.body.emails.map((e: any) => e.email)).toEqual(['hb2@example.com', 'hb1@example.com'])
    expect(all.body.emails[0].hard_bounced_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect((await list(`start_date=${today}&end_date=${today}&limit=1&offset=1`)).body.emails.map((e: any) => e.email)).toEqual(['hb1@example.com'])
    expect((await list(`start_date=${days(-3)}&end_date=${days(-1)}`)).body.emails).toEqual([])
    expect((await list('email=HB1@example.com')).body.emails.map((e: any) => e.email)).toEqual(['hb1@example.com'])
    expect((await list(`end_date=${today}`)).body.message).toBe('start_date: send start_date or email')
    expect((await list(`start_date=${today}&end_date=${days(-1)}`)).body.message).toBe('start_date: must be earlier than end_date')
    expect((await list(`start_date=${today}&end_date=${today}&limit=501`)).body.message).toBe('limit: must be at most 500')
    expect((await list('start_date=yesterday&end_date=today')).status).toBe(400)
  })

  it('lists unsubscribed addresses, by /email/status and by a profile, in either order', async () => {
    const w = await env.workspace()
    const status = (email: string, state: string) => env.writeAndWait(w.key, '/email/status', { email, subscription_state: state })
    await status('un1@example.com', 'unsubscribed')
    await new Promise((r) => setTimeout(r, 1100))
    await env.writeAndWait(w.key, '/users/track', { attributes: [{ external_id: 'un-2', email: 'un2@example.com', email_subscribe: 'unsubscribed' }] })
    await status('sub@example.com', 'subscribed')
    const list = (query: string) => env.call('GET', `/email/unsubscribes?${query}`, { key: w.key })
    const desc = await list(`start_date=${today}&end_date=${today}`)
    expect(desc.status, desc.text).toBe(200)
    expect(desc.body.emails.map((e: any) => e.email)).toEqual(['un2@example.com', 'un1@example.com'])
    expect(desc.body.emails[0].unsubscribed_at).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000$/)
    expect((await list(`start_date=${today}&end_date=${today}&sort_direction=asc`)).body.emails.map((e: any) => e.email)).toEqual([
      'un1@example.com',
      'un2@example.com',
    ])
    expect((await list('email=sub@example.com')).body.emails).toEqual([])
    expect((await list('email=un1@example.com')).body.emails.map((e: any) => e.email)).toEqual(['un1@example.com'])
    const other = await env.workspace(['email.hard_bounces'])
    expect((await env.call('GET', '/email/unsubscribes?email=a@example.com', { key: other.key })).status).toBe(403)
  })
})
