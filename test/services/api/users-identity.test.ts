import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { choose } from '../../../shared/domain/prioritization.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

// interface.md section 7, byte for byte.
const NOT_ARRAY = "'merge_updates' must be an array of objects"
const TOO_MANY = 'a single request may not contain more than 50 merge updates'
const BAD_IDENTIFIER =
  "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, or 'email' property that is a string"
const EXTRA_KEYS = "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'"
const PRIORITIZATION =
  "prioritization must be a non-empty ordered array of distinct values 'identified', 'unidentified' or 'most_recently_updated', with at most one of 'identified' and 'unidentified'"

// No workers: these tests look at what the API accepts and answers, not at what gets applied.
beforeAll(async () => {
  env = await startTestEnv()
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

const post = (path: string, body: unknown, key = ws.key) => env.call('POST', path, { key, body })
const pair = (merge: string, keep: string) => ({ identifier_to_merge: { external_id: merge }, identifier_to_keep: { external_id: keep } })

describe('POST /users/merge', () => {
  it('answers 202 {message: "success"} with a request id', async () => {
    const r = await post('/users/merge', {
      merge_updates: [
        pair('a', 'b'),
        { identifier_to_merge: { user_alias: { alias_name: 'n', alias_label: 'l' } }, identifier_to_keep: { external_id: 'b' } },
        { identifier_to_merge: { email: 'X@Example.com', prioritization: ['unidentified', 'most_recently_updated'] }, identifier_to_keep: { external_id: 'b' } },
        { identifier_to_merge: { phone: '+1 415 555 2671', prioritization: ['most_recently_updated'] }, identifier_to_keep: { external_id: 'b' } },
      ],
    })
    expect(r.status, r.text).toBe(202)
    expect(r.body).toEqual({ message: 'success' })
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  })

  it.each([
    ['no merge_updates', {}],
    ['a string', { merge_updates: 'x' }],
    ['an object', { merge_updates: { identifier_to_merge: {}, identifier_to_keep: {} } }],
    ['numbers', { merge_updates: [1, 2] }],
    ['a null element', { merge_updates: [pair('a', 'b'), null] }],
    ['nested arrays', { merge_updates: [[pair('a', 'b')]] }],
  ])('refuses merge_updates that is not an array of objects (%s)', async (_, body) => {
    const r = await post('/users/merge', body)
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: NOT_ARRAY })
  })

  it('accepts 50 merge updates and refuses 51', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => pair(`m${i}`, `k${i}`))
    expect((await post('/users/merge', { merge_updates: fifty })).status).toBe(202)
    const r = await post('/users/merge', { merge_updates: [...fifty, pair('m50', 'k50')] })
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: TOO_MANY })
  })

  it.each([
    ['a number external_id', { external_id: 5 }],
    ['an empty object', {}],
    ['a string user_alias', { user_alias: 'x' }],
    ['an alias without alias_label', { user_alias: { alias_name: 'x' } }],
    ['a number email', { email: 7, prioritization: ['identified'] }],
    ['two identifiers', { external_id: 'a', email: 'a@b.co', prioritization: ['identified'] }],
    ['an unknown identifier', { service_id: 'abc' }],
    ['a string', 'a'],
    ['null', null],
  ])('refuses a malformed identifier (%s)', async (_, identifier) => {
    for (const update of [
      { identifier_to_merge: identifier, identifier_to_keep: { external_id: 'k' } },
      { identifier_to_merge: { external_id: 'm' }, identifier_to_keep: identifier },
    ]) {
      const r = await post('/users/merge', { merge_updates: [update] })
      expect(r.status).toBe(400)
      expect(r.body).toEqual({ message: BAD_IDENTIFIER })
    }
  })

  it('refuses a missing identifier as malformed', async () => {
    const r = await post('/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'm' } }] })
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: BAD_IDENTIFIER })
  })

  it('refuses keys other than identifier_to_merge and identifier_to_keep', async () => {
    const r = await post('/users/merge', { merge_updates: [{ ...pair('a', 'b'), merge_behavior: 'merge' }] })
    expect(r.status).toBe(400)
    expect(r.body).toEqual({ message: EXTRA_KEYS })
  })

  it.each([
    ['missing', undefined],
    ['empty', []],
    ['not an array', 'identified'],
    ['an unknown value', ['identified', 'newest']],
    ['both identified and unidentified', ['identified', 'unidentified']],
    ['a repeated value', ['most_recently_updated', 'most_recently_updated']],
  ])('refuses an email or phone prioritization that is %s', async (_, prioritization) => {
    for (const identifier of [
      { email: 'a@example.com', prioritization },
      { phone: '+14155552671', prioritization },
    ]) {
      const r = await post('/users/merge', { merge_updates: [{ identifier_to_merge: identifier, identifier_to_keep: { external_id: 'k' } }] })
      expect(r.status).toBe(400)
      expect(r.body).toEqual({ message: `merge_updates[0].identifier_to_merge.prioritization: ${PRIORITIZATION}` })
    }
  })

  it('refuses a prioritization on an external_id or alias, and an invalid phone number', async () => {
    const withPriority = await post('/users/merge', {
      merge_updates: [{ identifier_to_merge: { external_id: 'm', prioritization: ['identified'] }, identifier_to_keep: { external_id: 'k' } }],
    })
    expect(withPriority.status).toBe(400)
    expect(withPriority.body.message).toBe('merge_updates[0].identifier_to_merge.prioritization: only email and phone identifiers take a prioritization')
    const phone = await post('/users/merge', {
      merge_updates: [pair('m', 'k'), { identifier_to_merge: { phone: '12', prioritization: ['identified'] }, identifier_to_keep: { external_id: 'k' } }],
    })
    expect(phone.status).toBe(400)
    expect(phone.body.message).toBe('merge_updates[1].identifier_to_merge.phone: must be a valid phone number with country code (E.164)')
  })
})

describe('POST /users/identify', () => {
  const alias = (i: number) => ({ external_id: `e${i}`, user_alias: { alias_name: `a${i}`, alias_label: 'app' } })

  it('answers 201 with aliases_processed for aliases and emails, whatever merge_behavior', async () => {
    for (const merge_behavior of [undefined, 'merge', 'none']) {
      const r = await post('/users/identify', {
        aliases_to_identify: [alias(1), alias(2)],
        emails_to_identify: [{ external_id: 'e3', email: 'E3@Example.com', prioritization: ['unidentified'] }],
        phone_numbers_to_identify: [{ external_id: 'e4', phone: '+44 20 7183 8750', prioritization: ['most_recently_updated'] }],
        ...(merge_behavior && { merge_behavior }),
      })
      expect(r.status, r.text).toBe(201)
      expect(r.body).toEqual({ aliases_processed: 4, message: 'success' })
      expect(r.headers.get('x-request-id')).toBeTruthy()
    }
  })

  it('accepts 50 users to identify and refuses 51', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => alias(i))
    expect((await post('/users/identify', { aliases_to_identify: fifty })).body).toEqual({ aliases_processed: 50, message: 'success' })
    const r = await post('/users/identify', { aliases_to_identify: [...fifty, alias(50)] })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('a single request may not identify more than 50 users (aliases_to_identify, emails_to_identify and phone_numbers_to_identify together)')
    const mixed = await post('/users/identify', {
      aliases_to_identify: fifty,
      emails_to_identify: [{ external_id: 'x', email: 'x@example.com', prioritization: ['identified'] }],
    })
    expect(mixed.status).toBe(400)
    const phones = await post('/users/identify', {
      aliases_to_identify: fifty.slice(1),
      phone_numbers_to_identify: [{ external_id: 'x', phone: '+14155552671', prioritization: ['identified'] }, { external_id: 'y', phone: '+14155552672', prioritization: ['identified'] }],
    })
    expect(phones.status).toBe(400)
  })

  it('refuses malformed entries, an unknown merge_behavior, an empty request and a bad prioritization', async () => {
    const cases: [unknown, string][] = [
      [{ aliases_to_identify: [{ external_id: 'e', user_alias: { alias_name: 'a' } }] }, 'aliases_to_identify.0.user_alias.alias_label:'],
      [{ aliases_to_identify: [{ user_alias: { alias_name: 'a', alias_label: 'l' } }] }, 'aliases_to_identify.0.external_id:'],
      [{ aliases_to_identify: [alias(1)], merge_behavior: 'keep' }, 'merge_behavior:'],
      [{ emails_to_identify: [{ external_id: 'e', email: 'not-an-email', prioritization: ['identified'] }] }, 'emails_to_identify.0.email: must be a valid email address'],
      [{ emails_to_identify: [{ external_id: 'e', email: `${'a'.repeat(243)}@example.com`, prioritization: ['identified'] }] }, 'emails_to_identify.0.email: must be at most 254 characters'],
      [{ emails_to_identify: [{ external_id: 'e', email: 'a@example.com', prioritization: ['identified', 'unidentified'] }] }, `emails_to_identify.0.prioritization: ${PRIORITIZATION}`],
      [{ emails_to_identify: [{ external_id: 'e', email: 'a@example.com' }] }, `emails_to_identify.0.prioritization: ${PRIORITIZATION}`],
      [{ phone_numbers_to_identify: [{ external_id: 'e', phone: '12', prioritization: ['identified'] }] }, 'phone_numbers_to_identify.0.phone: must be a valid phone number with country code (E.164)'],
      [{ phone_numbers_to_identify: [{ external_id: 'e', phone: '+14155552671' }] }, `phone_numbers_to_identify.0.prioritization: ${PRIORITIZATION}`],
      [{ phone_numbers_to_identify: [{ external_id: 'e', email: 'a@example.com', prioritization: ['identified'] }] }, 'phone_numbers_to_identify.0'],
      [{}, 'aliases_to_identify, emails_to_identify or phone_numbers_to_identify must name at least one user'],
      [{ aliases_to_identify: [] }, 'aliases_to_identify, emails_to_identify or phone_numbers_to_identify must name at least one user'],
    ]
    for (const [body, message] of cases) {
      const r = await post('/users/identify', body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.message.startsWith(message), `${r.body.message} / ${message}`).toBe(true)
    }
  })

  it('refuses a blocked external_id', async () => {
    // A workspace configured before its first request (API processes cache settings for a second).
    const blocking = await env.workspace()
    const put = await env.admin('PUT', `/admin/v1/workspaces/${blocking.id}/blocked_external_ids`, { external_ids: ['blocked-user'] })
    expect(put.status, put.text).toBeLessThan(300)
    const r = await post('/users/identify', { aliases_to_identify: [{ external_id: 'blocked-user', user_alias: { alias_name: 'b', alias_label: 'l' } }] }, blocking.key)
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('provided external_id is blacklisted and disallowed')
  })
})

describe('POST /users/delete', () => {
  it('answers 201 with the number of identifiers queued, for each kind of list', async () => {
    const bodies = [
      { external_ids: ['a', 'b'] },
      { user_aliases: [{ alias_name: 'n', alias_label: 'l' }, { alias_name: 'm', alias_label: 'l' }] },
      { service_ids: ['0123456789abcdef01234567', 'fedcba9876543210fedcba98'] },
      { email_addresses: [{ email: 'a@example.com', prioritization: ['identified'] }, { email: 'b@example.com', prioritization: ['most_recently_updated'] }] },
    ]
    for (const body of bodies) {
      const r = await post('/users/delete', body)
      expect(r.status, r.text).toBe(201)
      expect(r.body).toEqual({ deleted: 2, message: 'success' })
    }
  })

  it("accepts braze_ids, the reference's name of service_ids", async () => {
    expect((await post('/users/delete', { braze_ids: ['x', 'y'] })).body).toEqual({ deleted: 2, message: 'success' })
  })

  it('queues a repeated identifier once', async () => {
    expect((await post('/users/delete', { external_ids: ['a', 'a', 'b'] })).body).toEqual({ deleted: 2, message: 'success' })
  })

  it('accepts 50 identifiers and refuses 51', async () => {
    const ids = Array.from({ length: 51 }, (_, i) => `u${i}`)
    expect((await post('/users/delete', { external_ids: ids.slice(0, 50) })).body.deleted).toBe(50)
    const r = await post('/users/delete', { external_ids: ids })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('a single request may not contain more than 50 identifiers to delete')
  })

  it('refuses more than one kind of list, none, unknown lists and emails without prioritization', async () => {
    const cases: [unknown, string][] = [
      [{ external_ids: ['a'], service_ids: ['b'] }, 'a request carries one kind of identifier list: send only one of external_ids, user_aliases, service_ids, braze_ids, email_addresses (got external_ids, service_ids)'],
      [{}, 'name at least one user to delete in one of external_ids, user_aliases, service_ids, braze_ids, email_addresses'],
      [{ external_ids: [] }, 'name at least one user to delete'],
      [{ service_ids: ['x'], braze_ids: ['x'] }, 'a request carries one kind of identifier list'],
      [{ device_ids: ['x'] }, 'body: Unrecognized key'],
      [{ email_addresses: [{ email: 'a@example.com' }] }, `email_addresses.0.prioritization: ${PRIORITIZATION}`],
      [{ email_addresses: [{ email: `${'a'.repeat(243)}@example.com`, prioritization: ['identified'] }] }, 'email_addresses.0.email: must be at most 254 characters'],
      [{ email_addresses: ['a@example.com'] }, 'email_addresses.0:'],
      [{ email_addresses: [{ email: 'a@example.com', prioritization: ['unidentified', 'identified'] }] }, `email_addresses.0.prioritization: ${PRIORITIZATION}`],
    ]
    for (const [body, message] of cases) {
      const r = await post('/users/delete', body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.message.startsWith(message), `${r.body.message} / ${message}`).toBe(true)
    }
  })
})

describe('permissions', () => {
  it('answers 403 to a key lacking the endpoint permission', async () => {
    const trackOnly = await env.workspace(['users.track'])
    const calls: [string, unknown, string][] = [
      ['/users/merge', { merge_updates: [pair('a', 'b')] }, 'users.merge'],
      ['/users/identify', { aliases_to_identify: [{ external_id: 'e', user_alias: { alias_name: 'a', alias_label: 'l' } }] }, 'users.identify'],
      ['/users/delete', { external_ids: ['a'] }, 'users.delete'],
    ]
    for (const [path, body, permission] of calls) {
      const r = await post(path, body, trackOnly.key)
      expect(r.status).toBe(403)
      expect(r.body.message).toBe(`this API key lacks the permission ${permission}`)
    }
    const mergeOnly = await env.workspace(['users.merge'])
    expect((await post('/users/merge', { merge_updates: [pair('a', 'b')] }, mergeOnly.key)).status).toBe(202)
    expect((await post('/users/delete', { external_ids: ['a'] }, mergeOnly.key)).status).toBe(403)
  })
})

describe('prioritization', () => {
  const user = (id: number, external_id: string | null, updated_at: string) => ({ id, external_id, updated_at })
  const identifiedOld = user(1, 'a', '2024-01-01T00:00:00.000Z')
  const anonymousNew = user(2, null, '2024-03-01T00:00:00.000Z')
  const anonymousOld = user(3, null, '2024-02-01T00:00:00.000Z')

  it('applies the preferences in order and stops at one user', () => {
    expect(choose([identifiedOld, anonymousNew, anonymousOld], ['identified'])).toEqual({ kind: 'one', candidate: identifiedOld })
    expect(choose([identifiedOld, anonymousNew, anonymousOld], ['unidentified', 'most_recently_updated'])).toEqual({ kind: 'one', candidate: anonymousNew })
    expect(choose([identifiedOld, anonymousNew, anonymousOld], ['most_recently_updated', 'identified'])).toEqual({ kind: 'one', candidate: anonymousNew })
  })

  it('reports several users left, including a tie, as ambiguous', () => {
    expect(choose([identifiedOld, anonymousNew, anonymousOld], ['unidentified'])).toEqual({ kind: 'ambiguous', count: 2 })
    const tie = user(4, null, anonymousNew.updated_at)
    expect(choose([anonymousNew, tie], ['most_recently_updated'])).toEqual({ kind: 'ambiguous', count: 2 })
  })

  it('leaves the users as they were when nobody meets a preference, and finds none among none', () => {
    expect(choose([anonymousNew], ['identified'])).toEqual({ kind: 'one', candidate: anonymousNew })
    expect(choose([anonymousNew, anonymousOld], ['identified', 'most_recently_updated'])).toEqual({ kind: 'one', candidate: anonymousNew })
    expect(choose([], ['identified'])).toEqual({ kind: 'none' })
  })
})
