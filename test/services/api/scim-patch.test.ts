import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { expectScimError, scimCaller } from '../../helpers/scim.js'

/**
 * The SCIM User resource beyond interface.md 2.6, PATCH (RFC 7644 section 3.5.2) and versions
 * (section 3.14), driven with the request shapes of RFC 7644's examples and of the requests Okta and
 * Microsoft Entra ID document for their provisioning.
 */
const ORIGIN = 'idp.example'
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User'
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp'
const NOT_FOUND_BODY = '{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"detail":"User not found","status":404}'

let env: TestEnv
let token: string
let workspace: { id: string; name: string }

const scim = scimCaller(() => ({ baseUrl: env.baseUrl, token, origin: ORIGIN }))


/** The body an identity provider sends on create, with the interface's own attributes. */
function fullUser(userName: string, overrides: Record<string, unknown> = {}) {
  return {
    schemas: [USER_SCHEMA],
    externalId: `ext-${userName}`,
    userName,
    name: { formatted: 'Ms. Barbara J Jensen III', familyName: 'Jensen', givenName: 'Barbara' },
    displayName: 'Babs Jensen',
    active: true,
    emails: [
      { value: userName, type: 'work', primary: true },
      { value: `home.${userName}`, type: 'home' },
    ],
    department: 'engineering',
    permissions: { companyPermissions: ['admin'], appGroup: [{ appGroupName: workspace.name, appGroupPermissions: ['basic_access'], team: [{ teamName: 'Core' }] }] },
    ...overrides,
  }
}

async function create(userName: string, overrides: Record<string, unknown> = {}) {
  const r = await scim('POST', '/scim/v2/Users', { body: fullUser(userName, overrides) })
  expect(r.status, r.text).toBe(201)
  return r.body
}

const read = async (id: string) => {
  const r = await scim('GET', `/scim/v2/Users/${id}`)
  expect(r.status, r.text).toBe(200)
  return r.body
}

const patch = (id: string, Operations: unknown[], headers: Record<string, string> = {}) =>
  scim('PATCH', `/scim/v2/Users/${id}`, { body: { schemas: [PATCH_OP], Operations }, headers })

beforeAll(async () => {
  env = await startTestEnv()
  token = (await env.admin('POST', '/admin/v1/scim_tokens', { request_origin: ORIGIN })).body.token
  workspace = (await env.admin('POST', '/admin/v1/workspaces', { name: 'IdP App' })).body
})
afterAll(async () => {
  await env?.close()
})

describe('the User resource', () => {
  it('stores and returns externalId, displayName, active, emails and name.formatted', async () => {
    const created = await create('bjensen@example.com')
    expect(created).toMatchObject({
      externalId: 'ext-bjensen@example.com',
      userName: 'bjensen@example.com',
      name: { formatted: 'Ms. Barbara J Jensen III', familyName: 'Jensen', givenName: 'Barbara' },
      displayName: 'Babs Jensen',
      active: true,
      emails: [
        { value: 'bjensen@example.com', type: 'work', primary: true },
        { value: 'home.bjensen@example.com', type: 'home' },
      ],
      meta: { resourceType: 'User', version: expect.stringMatching(/^W\/"\d+"$/) },
    })
    expect(await read(created.id)).toEqual(created)
  })

  it('takes active as the strings Entra ID sends and starts active when it is left out', async () => {
    const inactive = await create('inactive@example.com', { active: 'False' })
    expect(inactive.active).toBe(false)
    const { active: _a, ...withoutActive } = fullUser('default-active@example.com')
    const r = await scim('POST', '/scim/v2/Users', { body: withoutActive })
    expect(r.body.active).toBe(true)
  })

  it('refuses two primary emails and a malformed active with 400 invalidValue, creating nothing', async () => {
    const two = await scim('POST', '/scim/v2/Users', {
      body: fullUser('two-primary@example.com', { emails: [{ value: 'a@example.com', primary: true }, { value: 'b@example.com', primary: true }] }),
    })
    expectScimError(two, 400, 'invalidValue')
    expect(two.body.detail).toMatch(/emails: at most one address may be primary/)
    expectScimError(await scim('POST', '/scim/v2/Users', { body: fullUser('bad-active@example.com', { active: 'maybe' }) }), 400, 'invalidValue')
    const found = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName sw "two-primary" or userName sw "bad-active"')}`)
    expect(found.body.totalResults).toBe(0)
  })

  it('PUT replaces: attributes left out are cleared, except active, which an interface client never sends', async () => {
    const created = await create('put-replace@example.com', { active: false })
    const put = await scim('PUT', `/scim/v2/Users/${created.id}`, {
      body: { schemas: [USER_SCHEMA], name: { givenName: 'Barbara', familyName: 'Jensen' }, department: 'finance', permissions: {} },
    })
    expect(put.status, put.text).toBe(200)
    const after = await read(created.id)
    expect(after).toEqual(put.body)
    expect(after).toMatchObject({ active: false, name: { givenName: 'Barbara', familyName: 'Jensen' }, department: 'finance' })
    for (const gone of ['externalId', 'displayName', 'emails']) expect(after[gone], gone).toBeUndefined()
    expect(after.name.formatted).toBeUndefined()

    const reactivated = await scim('PUT', `/scim/v2/Users/${created.id}`, { body: { ...after, active: true, externalId: 'again' } })
    expect(reactivated.body).toMatchObject({ active: true, externalId: 'again' })
  })
})

describe('PATCH /scim/v2/Users/{id}', () => {
  it('deactivates and reactivates with the body Okta sends (no path, value object)', async () => {
    const user = await create('okta@example.com')
    const off = await scim('PATCH', `/scim/v2/Users/${user.id}`, {
      body: { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] },
    })
    expect(off.status, off.text).toBe(200)
    expect(off.body.active).toBe(false)
    expect(off.headers.get('etag')).toBe(off.body.meta.version)
    expect(off.body.meta.version).not.toBe(user.meta.version)
    // Kept with every permission, only inactive.
    expect({ ...(await read(user.id)), active: true, meta: user.meta }).toEqual(user)
    const on = await patch(user.id, [{ op: 'replace', value: { active: true } }])
    expect(on.body.active).toBe(true)
  })

  it('a remove of active leaves it unassigned: its default, an active account (RFC 7644 3.5.2.2)', async () => {
    const user = await create('remove-active@example.com', { active: false })
    expect((await read(user.id)).active).toBe(false)
    const r = await patch(user.id, [{ op: 'remove', path: 'active' }])
    expect(r.status, r.text).toBe(200)
    expect(r.body.active).toBe(true)
    expect((await read(user.id)).active).toBe(true)
    // Another remove leaves the user as it is.
    expect((await patch(user.id, [{ op: 'remove', path: 'displayName' }])).body.active).toBe(true)
  })

  it('applies the operations Entra ID sends: capitalised ops, attribute paths, value filters, "False"', async () => {
    const user = await create('entra@example.com', { emails: [] })
    const r = await scim('PATCH', `/scim/v2/Users/${user.id}`, {
      body: {
        schemas: [PATCH_OP],
        Operations: [
          { op: 'Replace', path: 'name.givenName', value: 'Barb' },
          { op: 'Add', path: 'emails[type eq "work"].value', value: 'barb@work.example.com' },
          { op: 'Replace', path: 'title', value: 'tester' },
          { op: 'Replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber', value: '701984' },
          { op: 'Replace', path: 'active', value: 'False' },
        ],
      },
    })
    expect(r.status, r.text).toBe(200)
    expect(r.body).toMatchObject({ name: { givenName: 'Barb', familyName: 'Jensen' }, active: false, emails: [{ type: 'work', value: 'barb@work.example.com' }] })
    expect(r.body.title).toBeUndefined()
    // A second Add to the same filter changes the address in place (Entra ID sends Add for changes too).
    const again = await patch(user.id, [{ op: 'Add', path: 'emails[type eq "work"].value', value: 'barbara@work.example.com' }])
    expect(again.body.emails).toEqual([{ type: 'work', value: 'barbara@work.example.com' }])
    const stored = await read(user.id)
    expect(stored).toEqual(again.body)
    // Without the schemas member, and with operation names in capitals.
    const bare = await scim('PATCH', `/scim/v2/Users/${user.id}`, { body: { Operations: [{ op: 'REPLACE', path: 'displayName', value: 'B' }] } })
    expect(bare.body.displayName).toBe('B')
  })

  it('follows the examples of RFC 7644 section 3.5.2', async () => {
    const user = await create('rfc@example.com', { emails: [{ value: 'bjensen@example.com', type: 'work', primary: true }] })
    // 3.5.2.1: add without a path, attributes not kept here (nickName) ignored.
    const added = await patch(user.id, [{ op: 'add', value: { emails: [{ value: 'babs@jensen.org', type: 'home' }], nickName: 'Babs' } }])
    expect(added.status, added.text).toBe(200)
    expect(added.body.emails).toEqual([
      { value: 'bjensen@example.com', type: 'work', primary: true },
      { value: 'babs@jensen.org', type: 'home' },
    ])
    expect(added.body.nickName).toBeUndefined()
    // 3.5.2.3: replace a filtered element's sub-attribute, and a whole filtered element.
    const typed = await patch(user.id, [{ op: 'replace', path: 'emails[type eq "work"].value', value: 'bjensen@example.org' }])
    expect(typed.body.emails[0]).toEqual({ value: 'bjensen@example.org', type: 'work', primary: true })
    const whole = await patch(user.id, [{ op: 'replace', path: 'emails[type eq "home"]', value: { value: 'babs@jensen.net', type: 'home', primary: false } }])
    expect(whole.body.emails[1]).toEqual({ value: 'babs@jensen.net', type: 'home', primary: false })
    // 3.5.2.2: remove by filter, with `and` and `ew`.
    const removed = await patch(user.id, [{ op: 'remove', path: 'emails[type eq "work" and value ew "example.org"]' }])
    expect(removed.body.emails).toEqual([{ value: 'babs@jensen.net', type: 'home', primary: false }])
    // Replace without a path keeps the sub-attributes it does not name (3.5.2.3).
    const named = await patch(user.id, [{ op: 'replace', value: { name: { givenName: 'Babs' }, displayName: 'Babs J' } }])
    expect(named.body).toMatchObject({ name: { givenName: 'Babs', familyName: 'Jensen', formatted: 'Ms. Barbara J Jensen III' }, displayName: 'Babs J' })
    // Remove a single-valued attribute and a sub-attribute; attribute names in any case.
    const cleared = await patch(user.id, [{ op: 'remove', path: 'Name.Formatted' }, { op: 'remove', path: 'externalId' }, { op: 'remove', path: 'emails' }])
    expect(cleared.body.name).toEqual({ givenName: 'Babs', familyName: 'Jensen' })
    expect(cleared.body.externalId).toBeUndefined()
    expect(cleared.body.emails).toBeUndefined()
    // Our own attributes, by path and with the core schema prefix.
    const ours = await patch(user.id, [
      { op: 'replace', path: 'department', value: 'finance' },
      { op: 'replace', path: `${USER_SCHEMA}:permissions.companyPermissions`, value: ['admin', 'add_company_users'] },
    ])
    expect(ours.body.department).toBe('finance')
    expect(ours.body.permissions.companyPermissions).toEqual(['admin', 'add_company_users'])
    expect(ours.body.permissions.appGroup[0].team[0].teamId).toBe(user.permissions.appGroup[0].team[0].teamId)
    expect(await read(user.id)).toEqual(ours.body)
  })

  it.each([
    ['an unknown op', [{ op: 'copy', path: 'displayName', value: 'x' }], 'invalidSyntax'],
    ['an add without a value', [{ op: 'add', path: 'displayName' }], 'invalidSyntax'],
    ['an empty Operations list', [], 'invalidSyntax'],
    ['an unknown attribute', [{ op: 'replace', path: 'favouriteColour', value: 'red' }], 'invalidPath'],
    ['an unknown sub-attribute', [{ op: 'replace', path: 'name.nickname', value: 'x' }], 'invalidPath'],
    ['a malformed value filter', [{ op: 'replace', path: 'emails[type eq].value', value: 'x' }], 'invalidPath'],
    ['a value filter nested 20,000 deep', [{ op: 'remove', path: `emails[${'('.repeat(20_000)}type eq "work"${')'.repeat(20_000)}]` }], 'invalidPath'],
    ['a value filter on a single-valued attribute', [{ op: 'replace', path: 'name[givenName eq "x"]', value: 'x' }], 'invalidPath'],
    ['a remove without a path', [{ op: 'remove' }], 'noTarget'],
    ['a replace whose filter matches no element', [{ op: 'replace', path: 'emails[type eq "other"]', value: { value: 'o@example.com' } }], 'noTarget'],
    ['a null value for a complex attribute', [{ op: 'replace', path: 'name', value: null }], 'invalidValue'],
    ['a department outside the vocabulary', [{ op: 'replace', path: 'department', value: 'sales' }], 'invalidValue'],
    ['an active that is no boolean', [{ op: 'replace', path: 'active', value: 'maybe' }], 'invalidValue'],
    ['removing a required attribute', [{ op: 'remove', path: 'name.familyName' }], 'invalidValue'],
    ['a second primary email', [{ op: 'add', path: 'emails', value: [{ value: 'p@example.com', primary: true }] }], 'invalidValue'],
    ['a new userName', [{ op: 'replace', path: 'userName', value: 'someone.else@example.com' }], 'mutability'],
    ['a new userName without a path', [{ op: 'replace', value: { userName: 'someone.else@example.com' } }], 'mutability'],
    ['a new id', [{ op: 'replace', path: 'id', value: 'mine' }], 'mutability'],
    ['a change to meta', [{ op: 'replace', path: 'meta.version', value: 'W/"0"' }], 'mutability'],
  ])('refuses %s with 400 %s, applying none of the request', async (_what, ops, scimType) => {
    const user = await create(`refused-${Math.random().toString(36).slice(2)}@example.com`)
    // Valid operations come first: they must not be applied either.
    const r = await patch(user.id, [{ op: 'replace', path: 'displayName', value: 'Changed' }, { op: 'replace', value: { active: false } }, ...ops].slice(ops.length ? 0 : 2))
    expectScimError(r, 400, scimType)
    expect(await read(user.id)).toEqual(user)
  })

  it('names the bound of a path in its refusal, never a runtime message', async () => {
    const user = await create('bounded-path@example.com')
    const deep = await patch(user.id, [{ op: 'remove', path: `emails[${'('.repeat(20_000)}type eq "work"${')'.repeat(20_000)}]` }])
    expectScimError(deep, 400, 'invalidPath')
    expect(deep.body.detail).toBe('path is 40,022 characters long; at most 4,096 are allowed')
    const nested = await patch(user.id, [{ op: 'remove', path: `emails[${'not ('.repeat(33)}type eq "work"${')'.repeat(33)}]` }])
    expectScimError(nested, 400, 'invalidPath')
    expect(nested.body.detail).toBe('path nests parentheses and brackets 34 deep; at most 32 are allowed')
    expect(deep.text + nested.text).not.toMatch(/call stack|RangeError/)
    expect(await read(user.id)).toEqual(user)
  })

  it('refuses a body that is no PatchOp, and answers the section 7 body for an unknown id', async () => {
    const user = await create('not-patchop@example.com')
    expectScimError(await scim('PATCH', `/scim/v2/Users/${user.id}`, { body: { schemas: [USER_SCHEMA], Operations: [{ op: 'replace', path: 'displayName', value: 'x' }] } }), 400, 'invalidSyntax')
    expectScimError(await scim('PATCH', `/scim/v2/Users/${user.id}`, { body: { schemas: [PATCH_OP], Operations: { op: 'replace' } } }), 400, 'invalidSyntax')
    const unknown = await patch('00000000-0000-0000-0000-000000000000', [{ op: 'replace', value: { active: false } }])
    expect(unknown.status).toBe(404)
    expect(unknown.text).toBe(NOT_FOUND_BODY)
    expect(await read(user.id)).toEqual(user)
  })

  it('applies concurrent PATCHes one after the other, losing neither', async () => {
    const user = await create('concurrent@example.com', { emails: [] })
    const adds = Array.from({ length: 8 }, (_, i) => patch(user.id, [{ op: 'add', path: 'emails', value: [{ value: `c${i}@example.com`, type: `t${i}` }] }]))
    for (const r of await Promise.all(adds)) expect(r.status, r.text).toBe(200)
    const after = await read(user.id)
    expect(after.emails.map((e: { value: string }) => e.value).sort()).toEqual(Array.from({ length: 8 }, (_, i) => `c${i}@example.com`))
    expect(after.meta.version).toBe(`W/"${Number(/\d+/.exec(user.meta.version)![0]) + 8}"`)
  })
})

describe('versions: ETag, If-Match, If-None-Match', () => {
  it('answers the ETag equal to meta.version, and 304 to If-None-Match while unchanged', async () => {
    const user = await create('etag@example.com')
    const r = await scim('GET', `/scim/v2/Users/${user.id}`)
    expect(r.headers.get('etag')).toBe(r.body.meta.version)
    const same = await scim('GET', `/scim/v2/Users/${user.id}`, { headers: { 'if-none-match': r.body.meta.version } })
    expect(same.status).toBe(304)
    expect(same.text).toBe('')
    expect(same.headers.get('etag')).toBe(r.body.meta.version)
    await patch(user.id, [{ op: 'replace', path: 'displayName', value: 'New' }])
    const changed = await scim('GET', `/scim/v2/Users/${user.id}`, { headers: { 'if-none-match': r.body.meta.version } })
    expect(changed.status).toBe(200)
    expect(changed.body.displayName).toBe('New')
    expect(changed.headers.get('etag')).not.toBe(r.body.meta.version)
  })

  it('refuses a stale If-Match on PUT, PATCH and DELETE with 412, changing nothing', async () => {
    const user = await create('if-match@example.com')
    const current = (await patch(user.id, [{ op: 'replace', path: 'displayName', value: 'Current' }])).body
    const stale = { 'if-match': user.meta.version }
    expectScimError(await scim('PUT', `/scim/v2/Users/${user.id}`, { body: { ...user, department: 'finance' }, headers: stale }), 412)
    expectScimError(await patch(user.id, [{ op: 'replace', value: { active: false } }], stale), 412)
    expectScimError(await scim('DELETE', `/scim/v2/Users/${user.id}`, { headers: stale }), 412)
    expect(await read(user.id)).toEqual(current)

    // The current version, in the strong form, in a list, or `*` passes.
    const put = await scim('PUT', `/scim/v2/Users/${user.id}`, { body: { ...current, department: 'finance' }, headers: { 'if-match': current.meta.version } })
    expect(put.status, put.text).toBe(200)
    const strong = put.body.meta.version.replace(/^W\//, '')
    const patched = await patch(user.id, [{ op: 'replace', value: { active: false } }], { 'if-match': `"0", ${strong}` })
    expect(patched.status, patched.text).toBe(200)
    expect((await scim('DELETE', `/scim/v2/Users/${user.id}`, { headers: { 'if-match': '*' } })).status).toBe(204)
    expect((await scim('GET', `/scim/v2/Users/${user.id}`)).status).toBe(404)
  })
})
