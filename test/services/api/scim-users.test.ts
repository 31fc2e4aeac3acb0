import SCIMMY from 'scimmy'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RateLimits } from '../../../services/api/middleware/rate-limit.js'
import { ScimBucket } from '../../../shared/domain/rate-limits.js'
import { CompanyPermissions, Departments, WorkspacePermissions, parseUserFilter } from '../../../shared/domain/scim.js'
import { OperatorGeneration } from '../../../shared/operator-changes.js'
import { request, startTestEnv, type HttpResult, type TestEnv } from '../../helpers/harness.js'
import { SCIM_ERROR_SCHEMA, expectScimError, scimCaller } from '../../helpers/scim.js'

const ORIGIN = 'corp.example'
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User'
const NOT_FOUND_BODY = '{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"detail":"User not found","status":404}'

let env: TestEnv
let token: string
let sales: { id: string; name: string }
let support: { id: string; name: string }

const scim = scimCaller(() => ({ baseUrl: env.baseUrl, token, origin: ORIGIN }))

function newUser(userName: string, overrides: Record<string, unknown> = {}) {
  return {
    schemas: [USER_SCHEMA],
    userName,
    name: { givenName: 'Ada', familyName: 'Lovelace' },
    department: 'engineering',
    permissions: {
      companyPermissions: ['manage_company_settings'],
      appGroup: [
        {
          appGroupName: sales.name,
          appGroupPermissions: ['basic_access', 'send_campaigns_canvases'],
          team: [{ teamName: 'EMEA', teamPermissions: ['admin'] }],
          appGroupPermissionSets: [{ appGroupPermissionSetName: 'Campaign editors' }],
        },
      ],
    },
    ...overrides,
  }
}

async function createUser(userName: string, overrides: Record<string, unknown> = {}) {
  const r = await scim('POST', '/scim/v2/Users', { body: newUser(userName, overrides) })
  if (r.status !== 201) throw new Error(`create user: ${r.status} ${r.text}`)
  return r.body
}


async function workspace(name: string) {
  const r = await env.admin('POST', '/admin/v1/workspaces', { name })
  if (r.status !== 201) throw new Error(`workspace: ${r.status} ${r.text}`)
  return r.body as { id: string; name: string }
}

beforeAll(async () => {
  env = await startTestEnv()
  const t = await env.admin('POST', '/admin/v1/scim_tokens', { request_origin: ORIGIN })
  token = t.body.token
  sales = await workspace('Sales App')
  support = await workspace('Support App')
})
afterAll(async () => {
  await env?.close()
})

describe('SCIM filter parsing', () => {
  it('accepts eq on userName in any letter case and with the core schema prefix', () => {
    expect(parseUserFilter('userName eq "a@b.com"')).toEqual({ op: 'eq', attribute: 'userName', value: 'a@b.com' })
    expect(parseUserFilter(`USERNAME Eq "a@b.com"`)).toEqual({ op: 'eq', attribute: 'userName', value: 'a@b.com' })
    expect(parseUserFilter(`${USER_SCHEMA}:userName eq "a@b.com"`)).toEqual({ op: 'eq', attribute: 'userName', value: 'a@b.com' })
  })

  it('accepts and/or/not over the supported attributes', () => {
    expect(parseUserFilter('name.givenName sw "A" and not (department eq "finance" or userName co "x")')).toEqual({
      op: 'and',
      filters: [
        { op: 'sw', attribute: 'name.givenName', value: 'A' },
        {
          op: 'not',
          filter: {
            op: 'or',
            filters: [
              { op: 'eq', attribute: 'department', value: 'finance' },
              { op: 'co', attribute: 'userName', value: 'x' },
            ],
          },
        },
      ],
    })
  })

  it('reads the RFC 7644 operators, value paths and typed values', () => {
    expect(parseUserFilter('emails[type eq "work" and value co "@example.com"]')).toEqual({
      op: 'emails',
      filter: { op: 'and', filters: [{ op: 'eq', attribute: 'emails.type', value: 'work' }, { op: 'co', attribute: 'emails.value', value: '@example.com' }] },
    })
    expect(parseUserFilter('emails eq "a@b.com"')).toEqual({ op: 'eq', attribute: 'emails.value', value: 'a@b.com' })
    expect(parseUserFilter('active eq "False"')).toEqual({ op: 'eq', attribute: 'active', value: false })
    expect(parseUserFilter('meta.lastModified gt "2011-05-13T04:42:34Z"')).toEqual({ op: 'gt', attribute: 'meta.lastModified', value: '2011-05-13T04:42:34.000Z' })
    expect(parseUserFilter('ExternalId eq "701984"')).toEqual({ op: 'eq', attribute: 'externalId', value: '701984' })
  })

  it('refuses malformed filters, other attributes, operators a type lacks and values of the wrong type', () => {
    for (const f of [
      'userName eq', 'userName eq "a" junk', 'title eq "x"', 'name[givenName eq "x"]', 'emails[title eq "x"]', 'active gt true',
      'active co "t"', 'active eq "maybe"', 'meta.lastModified sw "2011"', 'meta.lastModified gt "yesterday"', 'userName eq 5',
    ]) {
      expect(() => parseUserFilter(f), f).toThrow(expect.objectContaining({ status: 400, extra: { scimType: 'invalidFilter' } }))
    }
  })
})

describe('SCIM authentication', () => {
  it('answers 401 without a token, with a wrong token or without X-Request-Origin', async () => {
    const none = await request(env.baseUrl, 'GET', '/scim/v2/Users', { headers: { 'x-request-origin': ORIGIN } })
    expectScimError(none, 401)
    expect(none.body.detail).toMatch(/missing SCIM token/)
    const wrong = await request(env.baseUrl, 'GET', '/scim/v2/Users', { token: 'uds_scim_nope', headers: { 'x-request-origin': ORIGIN } })
    expectScimError(wrong, 401)
    const apiKey = (await env.workspace()).key
    expectScimError(await request(env.baseUrl, 'GET', '/scim/v2/Users', { token: apiKey, headers: { 'x-request-origin': ORIGIN } }), 401)
    const noOrigin = await request(env.baseUrl, 'GET', '/scim/v2/Users', { token })
    expectScimError(noOrigin, 401)
    expect(noOrigin.body.detail).toMatch(/X-Request-Origin/)
  })

  it('answers 403 for an origin other than the token\'s', async () => {
    const r = await scim('GET', '/scim/v2/Users', { headers: { 'x-request-origin': 'evil.example' } })
    expectScimError(r, 403)
  })

  it('reports the company-wide SCIM rate limit in headers', async () => {
    const r = await scim('GET', '/scim/v2/Users')
    expect(r.status).toBe(200)
    expect(r.headers.get('x-ratelimit-limit')).toBe(String(ScimBucket.limit))
    expect(Number(r.headers.get('x-ratelimit-remaining'))).toBeLessThan(ScimBucket.limit)
    expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000)
  })
})

describe('POST /scim/v2/Users', () => {
  it('creates a user: 201, Location, ids of workspaces and teams, lastSignInAt null, meta', async () => {
    const r = await scim('POST', '/scim/v2/Users', { body: newUser('Grace.Hopper@Example.com') })
    expect(r.status).toBe(201)
    expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/)
    const id = r.body.id
    expect(id).toEqual(expect.any(String))
    expect(new URL(r.headers.get('location')!).pathname).toBe(`/scim/v2/Users/${id}`)
    expect(r.body).toEqual({
      schemas: [USER_SCHEMA],
      id,
      userName: 'Grace.Hopper@Example.com',
      name: { givenName: 'Ada', familyName: 'Lovelace' },
      department: 'engineering',
      lastSignInAt: null,
      permissions: {
        companyPermissions: ['manage_company_settings'],
        appGroup: [
          {
            appGroupId: sales.id,
            appGroupName: sales.name,
            appGroupPermissions: ['basic_access', 'send_campaigns_canvases'],
            team: [{ teamId: expect.any(String), teamName: 'EMEA', teamPermissions: ['admin'] }],
            appGroupPermissionSets: [{ appGroupPermissionSetName: 'Campaign editors' }],
          },
        ],
      },
      active: true,
      meta: {
        resourceType: 'User',
        created: expect.any(String),
        lastModified: expect.any(String),
        location: r.headers.get('location'),
        version: r.headers.get('etag'),
      },
    })
    expect(r.headers.get('etag')).toMatch(/^W\/"\d+"$/)
    expect(new Date(r.body.meta.created).toISOString()).toBe(r.body.meta.created)

    const read = await scim('GET', `/scim/v2/Users/${id}`)
    expect(read.status).toBe(200)
    expect(read.body).toEqual(r.body)
  })

  it('gives a team one id for every user that names it in the same workspace', async () => {
    const a = await createUser('team-a@example.com')
    const b = await createUser('team-b@example.com', {
      permissions: {
        appGroup: [
          { appGroupName: sales.name, team: [{ teamName: 'EMEA' }] },
          { appGroupName: support.name, team: [{ teamName: 'EMEA' }] },
        ],
      },
    })
    const salesEmea = a.permissions.appGroup[0].team[0].teamId
    expect(b.permissions.appGroup[0].team[0].teamId).toBe(salesEmea)
    expect(b.permissions.appGroup[1].team[0].teamId).not.toBe(salesEmea)
    expect(b.permissions.companyPermissions).toEqual([])
    expect(b.permissions.appGroup[1]).toMatchObject({ appGroupId: support.id, appGroupPermissions: [], appGroupPermissionSets: [] })
  })

  it('refuses a duplicate userName in any letter case with 409 uniqueness', async () => {
    await createUser('dup@example.com')
    const r = await scim('POST', '/scim/v2/Users', { body: newUser('DUP@example.COM') })
    expectScimError(r, 409, 'uniqueness')
    const list = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "dup@example.com"')}`)
    expect(list.body.totalResults).toBe(1)
  })

  it.each([
    ['schemas without the User schema', { schemas: ['urn:example:Other'] }, /schemas/],
    ['a userName that is not an email', { userName: 'not-an-email' }, /userName/],
    ['a missing name', { name: undefined }, /name/],
    ['a missing familyName', { name: { givenName: 'A' } }, /name\.familyName/],
    ['an unknown department', { department: 'sales' }, /department: unknown department "sales"/],
    ['an unknown company permission', { permissions: { companyPermissions: ['fly'] } }, /"fly"/],
    ['an unknown workspace permission', { permissions: { appGroup: [{ appGroupName: 'Sales App', appGroupPermissions: ['root'] }] } }, /"root"/],
    ['an unknown team permission', { permissions: { appGroup: [{ appGroupName: 'Sales App', team: [{ teamName: 'T', teamPermissions: ['root'] }] }] } }, /"root"/],
    ['an unknown workspace', { permissions: { appGroup: [{ appGroupName: 'Nowhere' }] } }, /unknown workspace "Nowhere"/],
    ['an appGroup entry without a workspace name', { permissions: { appGroup: [{ appGroupPermissions: ['admin'] }] } }, /appGroupName/],
    ['an empty permission set name', { permissions: { appGroup: [{ appGroupName: 'Sales App', appGroupPermissionSets: [{ appGroupPermissionSetName: ' ' }] }] } }, /appGroupPermissionSetName/],
    ['a permission set outside any workspace', { permissions: { appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }] } }, /appGroupPermissionSets/],
    ['a workspace listed twice', { permissions: { appGroup: [{ appGroupName: 'Sales App' }, { appGroupName: 'Sales App' }] } }, /listed twice/],
    ['a misspelt permissions key', { permissions: { companyPermission: ['admin'] } }, /companyPermission/],
    ['missing permissions', { permissions: undefined }, /permissions/],
  ])('refuses %s with 400 invalidValue naming it', async (_what, overrides, detail) => {
    const r = await scim('POST', '/scim/v2/Users', { body: newUser('invalid@example.com', overrides) })
    expectScimError(r, 400, 'invalidValue')
    expect(r.body.detail).toMatch(detail)
    const list = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "invalid@example.com"')}`)
    expect(list.body.totalResults).toBe(0)
  })

  it('accepts and ignores attributes it does not store, and a client-chosen id', async () => {
    const r = await scim('POST', '/scim/v2/Users', {
      body: newUser('extra@example.com', {
        id: 'mine',
        title: 'Engineer',
        phoneNumbers: [{ value: '+1 555 0100', type: 'work' }],
        'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { employeeNumber: '701984', department: 'Tour Operations' },
      }),
    })
    expect(r.status).toBe(201)
    expect(r.body.id).not.toBe('mine')
    expect(r.body.title).toBeUndefined()
    expect(r.body.phoneNumbers).toBeUndefined()
    expect(r.body['urn:ietf:params:scim:schemas:extension:enterprise:2.0:User']).toBeUndefined()
    expect(r.body.department).toBe('engineering')
  })
})

describe('GET /scim/v2/Users', () => {
  let users: { id: string; userName: string }[]
  beforeAll(async () => {
    users = []
    for (const n of ['p1', 'p2', 'p3']) users.push(await createUser(`${n}.paging@list.example`, { department: 'finance' }))
  })

  it('finds a user by userName, case-insensitively, URL-encoded or not', async () => {
    const expected = { schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'], totalResults: 1, startIndex: 1, itemsPerPage: 1 }
    const queries = [
      `filter=${encodeURIComponent('userName eq "p2.paging@list.example"')}`,
      'filter=userName%20eq%20%22P2.Paging%40LIST.example%22',
      'filter=userName+eq+"p2.paging@list.example"',
      'filter=userName eq "p2.paging@list.example"',
    ]
    for (const q of queries) {
      const r = await scim('GET', `/scim/v2/Users?${q}`)
      expect(r.status, q).toBe(200)
      expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/)
      expect(r.body).toMatchObject(expected)
      expect(r.body.Resources.map((u: { id: string }) => u.id)).toEqual([users[1].id])
      expect(r.body.Resources[0].userName).toBe('p2.paging@list.example')
    }
  })

  it('answers an empty list for an unknown userName', async () => {
    const r = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "nobody@example.com"')}`)
    expect(r.status).toBe(200)
    expect(r.body).toEqual({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
      totalResults: 0,
      startIndex: 1,
      itemsPerPage: 0,
      Resources: [],
    })
  })

  it('pages with startIndex and count', async () => {
    const f = `filter=${encodeURIComponent('userName ew "@list.example"')}`
    const first = await scim('GET', `/scim/v2/Users?${f}&count=2`)
    expect(first.body).toMatchObject({ totalResults: 3, startIndex: 1, itemsPerPage: 2 })
    const second = await scim('GET', `/scim/v2/Users?${f}&startIndex=3&count=2`)
    expect(second.body).toMatchObject({ totalResults: 3, startIndex: 3, itemsPerPage: 1 })
    const ids = [...first.body.Resources, ...second.body.Resources].map((u: { id: string }) => u.id)
    expect(ids).toEqual(users.map((u) => u.id))
    const none = await scim('GET', `/scim/v2/Users?${f}&count=0`)
    expect(none.body).toMatchObject({ totalResults: 3, itemsPerPage: 0, Resources: [] })
    const clamped = await scim('GET', `/scim/v2/Users?${f}&startIndex=-4`)
    expect(clamped.body).toMatchObject({ startIndex: 1, itemsPerPage: 3 })
    expectScimError(await scim('GET', `/scim/v2/Users?${f}&count=many`), 400, 'invalidValue')
  })

  it('lists every user without a filter', async () => {
    const r = await scim('GET', '/scim/v2/Users?count=1000')
    expect(r.status).toBe(200)
    expect(r.body.totalResults).toBe(r.body.Resources.length)
    const ids = r.body.Resources.map((u: { id: string }) => u.id)
    for (const u of users) expect(ids).toContain(u.id)
  })

  it('supports sw, co, ne, pr, and/or/not on name, department and userName', async () => {
    const ids = async (filter: string) =>
      (await scim('GET', `/scim/v2/Users?count=1000&filter=${encodeURIComponent(filter)}`)).body.Resources.map((u: { id: string }) => u.id)
    expect(await ids('userName sw "P1.PAGING"')).toEqual([users[0].id])
    expect(await ids('department eq "finance" and (userName co "p1" or userName co "p3")')).toEqual([users[0].id, users[2].id])
    expect(await ids('department eq "finance" and not (userName eq "p1.paging@list.example")')).toEqual([users[1].id, users[2].id])
    expect(await ids('department eq "finance" and userName ne "p2.paging@list.example"')).toEqual([users[0].id, users[2].id])
    expect(await ids('name.givenName eq "ada" and department pr and userName ew "list.example"')).toEqual(users.map((u) => u.id))
    expect(await ids(`id eq "${users[1].id}"`)).toEqual([users[1].id])
    // LIKE wildcards in a value match themselves only.
    expect(await ids('userName co "%"')).toEqual([])
    expect(await ids('userName sw "p_"')).toEqual([])
  })

  it('refuses unsupported or malformed filters with 400 invalidFilter', async () => {
    for (const f of ['userName eq', 'title eq "x"', 'active gt true', 'phoneNumbers[value eq "x"]', '']) {
      const r = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent(f)}`)
      expectScimError(r, 400, 'invalidFilter')
    }
    expectScimError(await scim('GET', '/scim/v2/Users?filter=a&filter=b'), 400, 'invalidFilter')
  })

  it('bounds a filter before parsing it: 400 invalidFilter naming the limit, never a runtime message', async () => {
    const SEARCH = 'urn:ietf:params:scim:api:messages:2.0:SearchRequest'
    const deep = (n: number) => `${'('.repeat(n)}userName eq "x"${')'.repeat(n)}`
    const nots = (n: number) => `${'not ('.repeat(n)}userName eq "x"${')'.repeat(n)}`
    const cases: [string, string][] = [
      // 20,000 deep: over the length bound, which is checked before the nesting.
      [deep(20_000), 'filter is 40,015 characters long; at most 4,096 are allowed'],
      [deep(2_000), 'filter nests parentheses and brackets 2,000 deep; at most 32 are allowed'],
      [nots(33), 'filter nests parentheses and brackets 33 deep; at most 32 are allowed'],
      [Array.from({ length: 300 }, (_, i) => `userName eq "u${i}@example.com"`).join(' or '), expect.stringMatching(/^filter is [\d,]+ characters long; at most 4,096 are allowed$/) as unknown as string],
    ]
    for (const [filter, detail] of cases) {
      const r = await scim('POST', '/scim/v2/Users/.search', { body: { schemas: [SEARCH], filter } })
      expectScimError(r, 400, 'invalidFilter')
      expect(r.body.detail).toEqual(detail)
      expect(r.text).not.toMatch(/call stack|RangeError|TypeError/)
    }
    // Parentheses inside a quoted value are text, not nesting; 32 levels are answered.
    const ok = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent(`${deep(32)} or userName eq "${'('.repeat(40)}"`)}`)
    expect(ok.status, ok.text).toBe(200)
    expect(ok.body.totalResults).toBe(0)
    const refused = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent(deep(33))}`)
    expectScimError(refused, 400, 'invalidFilter')
    expect(refused.body.detail).toBe('filter nests parentheses and brackets 33 deep; at most 32 are allowed')
  })
})

describe('GET, PUT and DELETE /scim/v2/Users/{id}', () => {
  const unknownId = '00000000-0000-0000-0000-000000000000'

  it.each(['GET', 'PUT', 'DELETE'])('%s of an unknown id answers 404 with exactly the section 7 body', async (method) => {
    const body = method === 'PUT' ? newUser('ghost@example.com') : undefined
    const r = await scim(method, `/scim/v2/Users/${unknownId}`, { body })
    expect(r.status).toBe(404)
    expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/)
    expect(r.text).toBe(NOT_FOUND_BODY)
  })

  it('PUT of an unknown id is 404 even with an invalid body', async () => {
    const r = await scim('PUT', `/scim/v2/Users/${unknownId}`, { body: {} })
    expect(r.text).toBe(NOT_FOUND_BODY)
  })

  it('PUT replaces name, department and permissions and keeps userName and team ids', async () => {
    const created = await createUser('replace@example.com')
    const emeaId = created.permissions.appGroup[0].team[0].teamId
    const replacement = {
      schemas: [USER_SCHEMA],
      name: { givenName: 'Grace', familyName: 'Hopper' },
      department: 'marketing',
      permissions: {
        companyPermissions: ['admin'],
        appGroup: [
          {
            appGroupName: support.name,
            appGroupPermissions: ['view_pii'],
            team: [{ teamName: 'APAC', teamPermissions: ['basic_access'] }],
            appGroupPermissionSets: [],
          },
          { appGroupName: sales.name, team: [{ teamName: 'EMEA', teamPermissions: ['export_user_data'] }] },
        ],
      },
    }
    const put = await scim('PUT', `/scim/v2/Users/${created.id}`, { body: replacement })
    expect(put.status).toBe(200)
    const read = await scim('GET', `/scim/v2/Users/${created.id}`)
    expect(read.body).toEqual(put.body)
    expect(read.body).toMatchObject({
      id: created.id,
      userName: 'replace@example.com',
      name: { givenName: 'Grace', familyName: 'Hopper' },
      department: 'marketing',
      lastSignInAt: null,
      permissions: {
        companyPermissions: ['admin'],
        appGroup: [
          {
            appGroupId: support.id,
            appGroupName: support.name,
            appGroupPermissions: ['view_pii'],
            team: [{ teamId: expect.any(String), teamName: 'APAC', teamPermissions: ['basic_access'] }],
            appGroupPermissionSets: [],
          },
          {
            appGroupId: sales.id,
            appGroupName: sales.name,
            appGroupPermissions: [],
            team: [{ teamId: emeaId, teamName: 'EMEA', teamPermissions: ['export_user_data'] }],
            appGroupPermissionSets: [],
          },
        ],
      },
    })
    expect(read.body.meta.created).toBe(created.meta.created)
    expect(Date.parse(read.body.meta.lastModified)).toBeGreaterThanOrEqual(Date.parse(created.meta.lastModified))
  })

  it('PUT accepts the stored userName (any letter case) and a user read back as it was, and refuses another', async () => {
    const created = await createUser('fixed@example.com')
    const same = await scim('PUT', `/scim/v2/Users/${created.id}`, { body: { ...newUser('FIXED@example.com'), department: 'finance' } })
    expect(same.status).toBe(200)
    expect(same.body.userName).toBe('fixed@example.com')
    const roundTrip = await scim('PUT', `/scim/v2/Users/${created.id}`, { body: { ...same.body, department: 'c_suite' } })
    expect(roundTrip.status).toBe(200)
    expect(roundTrip.body.permissions).toEqual(same.body.permissions)

    const changed = await scim('PUT', `/scim/v2/Users/${created.id}`, { body: newUser('other@example.com') })
    expectScimError(changed, 400, 'mutability')
    const read = await scim('GET', `/scim/v2/Users/${created.id}`)
    expect(read.body).toMatchObject({ userName: 'fixed@example.com', department: 'c_suite' })
  })

  it('PUT validates like POST and requires name, department and permissions', async () => {
    const created = await createUser('strict-put@example.com')
    const { name: _n, ...withoutName } = newUser('strict-put@example.com')
    expectScimError(await scim('PUT', `/scim/v2/Users/${created.id}`, { body: withoutName }), 400, 'invalidValue')
    const { department: _d, ...withoutDepartment } = newUser('strict-put@example.com')
    expectScimError(await scim('PUT', `/scim/v2/Users/${created.id}`, { body: withoutDepartment }), 400, 'invalidValue')
    const { permissions: _p, ...withoutPermissions } = newUser('strict-put@example.com')
    expectScimError(await scim('PUT', `/scim/v2/Users/${created.id}`, { body: withoutPermissions }), 400, 'invalidValue')
    const badWs = await scim('PUT', `/scim/v2/Users/${created.id}`, {
      body: newUser('strict-put@example.com', { permissions: { appGroup: [{ appGroupName: 'Gone' }] } }),
    })
    expectScimError(badWs, 400, 'invalidValue')
    expect(badWs.body.detail).toMatch(/"Gone"/)
    const read = await scim('GET', `/scim/v2/Users/${created.id}`)
    expect(read.body).toEqual(created)
  })

  it('DELETE answers 204 with no body, and the user is gone', async () => {
    const created = await createUser('leaving@example.com')
    const r = await scim('DELETE', `/scim/v2/Users/${created.id}`)
    expect(r.status).toBe(204)
    expect(r.text).toBe('')
    expect((await scim('GET', `/scim/v2/Users/${created.id}`)).text).toBe(NOT_FOUND_BODY)
    expect((await scim('DELETE', `/scim/v2/Users/${created.id}`)).text).toBe(NOT_FOUND_BODY)
    const list = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "leaving@example.com"')}`)
    expect(list.body.totalResults).toBe(0)
    // The userName is free again.
    expect((await scim('POST', '/scim/v2/Users', { body: newUser('leaving@example.com') })).status).toBe(201)
  })

  it('a method a SCIM resource does not allow answers a SCIM 405 with an Allow header', async () => {
    const created = await scim('POST', '/scim/v2/Users', { body: newUser('methods@example.com') })
    const cases: [string, string, string][] = [
      ['PATCH', '/scim/v2/Users', 'GET, HEAD, POST'],
      ['DELETE', '/scim/v2/Users', 'GET, HEAD, POST'],
      ['POST', `/scim/v2/Users/${created.body.id}`, 'GET, HEAD, PUT, PATCH, DELETE'],
      ['PUT', '/scim/v2/ServiceProviderConfig', 'GET, HEAD'],
      ['DELETE', '/scim/v2/Schemas', 'GET, HEAD'],
      ['POST', '/scim/v2/ResourceTypes/User', 'GET, HEAD'],
    ]
    for (const [method, path, allow] of cases) {
      const r = await scim(method, path, { body: method === 'DELETE' ? undefined : {} })
      expectScimError(r, 405)
      expect(r.headers.get('allow'), `${method} ${path}`).toBe(allow)
    }
    // The user is untouched.
    expect((await scim('GET', `/scim/v2/Users/${created.body.id}`)).status).toBe(200)
  })

  it('Groups, Bulk and other SCIM paths answer a SCIM 404 saying what is provided', async () => {
    for (const path of ['/scim/v2/Groups', `/scim/v2/Groups?filter=${encodeURIComponent('displayName eq "Admins"')}`, '/scim/v2/Bulk', '/scim/v2/Me']) {
      const r = await scim('GET', path)
      expectScimError(r, 404)
      expect(r.body.detail).toMatch(/Users only/)
    }
    expectScimError(await scim('POST', '/scim/v2/Groups', { body: { schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'], displayName: 'Admins' } }), 404)
    expectScimError(await scim('GET', '/scim/v2/Nothing'), 404)
  })
})

/**
 * SCIMMY (npm `scimmy`), an independent RFC 7643/7644 implementation, reads every answer: users are
 * coerced through its core User schema extended with the attributes of interface.md 2.6, lists through
 * its ListResponse message, errors through its Error message, and its in-memory filter engine must pick
 * the same users as our SQL does.
 */
describe('third-party check with SCIMMY', () => {
  const { Attribute, Filter } = SCIMMY.Types
  const readOnly = { mutable: false, direction: 'out' as const }
  const permissionNames = (name: string, values: readonly string[]) =>
    new Attribute('string', name, { multiValued: true, canonicalValues: [...values] })
  const dashboardUser = SCIMMY.Schemas.User.definition.extend([
    new Attribute('string', 'department', { required: true, canonicalValues: [...Departments] }),
    new Attribute('dateTime', 'lastSignInAt', readOnly),
    new Attribute('complex', 'permissions', { required: true }, [
      permissionNames('companyPermissions', CompanyPermissions),
      new Attribute('complex', 'appGroup', { multiValued: true }, [
        new Attribute('string', 'appGroupId', readOnly),
        new Attribute('string', 'appGroupName', { required: true }),
        permissionNames('appGroupPermissions', WorkspacePermissions),
        new Attribute('complex', 'team', { multiValued: true }, [
          new Attribute('string', 'teamId', readOnly),
          new Attribute('string', 'teamName', { required: true }),
          permissionNames('teamPermissions', WorkspacePermissions),
        ]),
        new Attribute('complex', 'appGroupPermissionSets', { multiValued: true }, [
          new Attribute('string', 'appGroupPermissionSetName', { required: true }),
        ]),
      ]),
    ]),
  ])

  /** SCIMMY keeps exactly what the schema describes; it drops nulls, equivalent to unassigned (RFC 7643 2.5). */
  function expectValidUser(user: Record<string, unknown>) {
    const { lastSignInAt, ...assigned } = user
    expect(lastSignInAt).toBeNull()
    expect(dashboardUser.coerce(user, 'out')).toEqual(assigned)
  }

  function expectValidError(r: HttpResult) {
    expect(r.body.schemas).toEqual([SCIM_ERROR_SCHEMA])
    // Its outbound constructor checks that the status and scimType go together (RFC 7644 3.12).
    expect(() => new SCIMMY.Messages.ErrorResponse({ status: r.body.status, scimType: r.body.scimType, detail: r.body.detail })).not.toThrow()
    expect(() => new SCIMMY.Messages.ErrorResponse(r.body)).toThrow(expect.objectContaining({ name: 'SCIMError', status: r.status }))
  }

  async function listAll(filter: string) {
    const r = await scim('GET', `/scim/v2/Users?count=1000&filter=${encodeURIComponent(filter)}`)
    expect(r.status).toBe(200)
    const list = new SCIMMY.Messages.ListResponse(r.body)
    expect(list.totalResults).toBe(r.body.Resources.length)
    for (const u of r.body.Resources) expectValidUser(u)
    return r.body.Resources as { id: string }[]
  }

  it('accepts every user answer, list and error of a create, read, replace, delete run', async () => {
    const created = await scim('POST', '/scim/v2/Users', { body: newUser('Run@scimmy.example') })
    expect(created.status).toBe(201)
    expectValidUser(created.body)
    expectValidUser((await scim('GET', `/scim/v2/Users/${created.body.id}`)).body)
    await listAll('userName eq "run@scimmy.example"')
    const replaced = await scim('PUT', `/scim/v2/Users/${created.body.id}`, {
      body: { ...created.body, department: 'other', permissions: { appGroup: [{ appGroupName: support.name, team: [{ teamName: 'Tier 1', teamPermissions: ['view_pii'] }] }] } },
    })
    expect(replaced.status).toBe(200)
    expectValidUser(replaced.body)

    expectValidError(await scim('POST', '/scim/v2/Users', { body: newUser('run@SCIMMY.example') }))
    expectValidError(await scim('POST', '/scim/v2/Users', { body: newUser('bad@scimmy.example', { department: 'sales' }) }))
    expectValidError(await scim('PUT', `/scim/v2/Users/${created.body.id}`, { body: newUser('renamed@scimmy.example') }))
    expectValidError(await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq')}`))
    expectValidError(await request(env.baseUrl, 'GET', '/scim/v2/Users', { headers: { 'x-request-origin': ORIGIN } }))
    expectValidError(await scim('GET', '/scim/v2/Users', { headers: { 'x-request-origin': 'elsewhere.example' } }))
    expect((await scim('DELETE', `/scim/v2/Users/${created.body.id}`)).status).toBe(204)
    expectValidError(await scim('GET', `/scim/v2/Users/${created.body.id}`))
  })

  it('selects the same users as SCIMMY\'s filter engine', async () => {
    const people = [
      ['alan@filters.scimmy.example', 'Alan', 'Turing', 'engineering'],
      ['alice@filters.scimmy.example', 'Alice', 'Ball', 'finance'],
      ['bob@filters.scimmy.example', 'Bob', 'Kahn', 'finance'],
      ['carol@other.scimmy.example', 'Carol', 'Shaw', 'c_suite'],
    ]
    for (const [userName, givenName, familyName, department] of people) {
      await createUser(userName, { name: { givenName, familyName }, department })
    }
    const everyone = await listAll('userName ew "scimmy.example"')
    // SCIMMY compares strings case-sensitively, so these filters use the stored letter case.
    const filters = [
      'userName eq "alice@filters.scimmy.example"',
      'userName sw "al"',
      'userName co "@filters." and department eq "finance"',
      'name.givenName sw "A" or name.familyName eq "Shaw"',
      'not (department eq "finance") and userName ew ".scimmy.example"',
      'department ne "engineering" and name.familyName pr',
      'userName ew "@other.scimmy.example" or (department eq "finance" and name.givenName ne "Bob")',
    ]
    for (const f of filters) {
      const ours = (await listAll(`(${f}) and userName ew "scimmy.example"`)).map((u) => u.id)
      const theirs = new Filter(f).match(everyone).map((u: { id: string }) => u.id)
      expect(ours, f).toEqual(theirs)
      expect(ours.length, f).toBeGreaterThan(0)
    }
  })
})

describe('SCIM rate limit', () => {
  it('answers 429 with a SCIM error once the company-wide daily limit is spent', async () => {
    const limits = new RateLimits(env.ctx.redis, new OperatorGeneration(env.ctx.redis, env.config.QUEUE_PREFIX))
    const headers = { setHeader: () => undefined } as never
    const spend = Array.from({ length: ScimBucket.limit }, () => limits.consume(headers, ScimBucket, 'company').catch(() => undefined))
    await Promise.all(spend)
    const r = await scim('GET', '/scim/v2/Users')
    expectScimError(r, 429)
    expect(r.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0)
  })
})
