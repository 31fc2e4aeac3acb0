import SCIMMY from 'scimmy'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { expectScimError, scimCaller } from '../../helpers/scim.js'

/**
 * SCIM queries (RFC 7644 section 3.4): filters on the attributes identity providers match on,
 * paging, attributes/excludedAttributes and POST /Users/.search; and discovery (section 4).
 */
const ORIGIN = 'queries.example'
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User'
const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse'
const SEARCH = 'urn:ietf:params:scim:api:messages:2.0:SearchRequest'

let env: TestEnv
let token: string
const users: Record<string, { id: string; meta: { lastModified: string; created: string } }> = {}

const scim = scimCaller(() => ({ baseUrl: env.baseUrl, token, origin: ORIGIN }))


/** The user keys (see beforeAll) a filter selects, in listing order. */
async function select(filter: string): Promise<string[]> {
  const r = await scim('GET', `/scim/v2/Users?count=1000&filter=${encodeURIComponent(filter)}`)
  expect(r.status, `${filter}: ${r.text}`).toBe(200)
  const byId = Object.fromEntries(Object.entries(users).map(([k, u]) => [u.id, k]))
  return r.body.Resources.map((u: { id: string }) => byId[u.id])
}

beforeAll(async () => {
  env = await startTestEnv()
  token = (await env.admin('POST', '/admin/v1/scim_tokens', { request_origin: ORIGIN })).body.token
  const people: [string, Record<string, unknown>][] = [
    ['ann', { externalId: 'E-100', active: true, emails: [{ value: 'Ann@Work.example', type: 'work', primary: true }, { value: 'ann@home.example', type: 'home' }] }],
    ['bob', { externalId: 'e-100', active: false, emails: [{ value: 'bob@work.example', type: 'work' }] }],
    ['cat', { active: true, displayName: 'Cat' }],
    ['dan', { externalId: 'E-200', active: false, emails: [{ value: 'dan@home.example', type: 'home', primary: true }] }],
  ]
  for (const [key, extra] of people) {
    const r = await scim('POST', '/scim/v2/Users', {
      body: {
        schemas: [USER_SCHEMA],
        userName: `${key}@people.example`,
        name: { givenName: key, familyName: 'Query' },
        department: 'other',
        permissions: {},
        ...extra,
      },
    })
    expect(r.status, r.text).toBe(201)
    users[key] = r.body
    // Distinct lastModified values, a millisecond apart at least.
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
})
afterAll(async () => {
  await env?.close()
})

describe('filters', () => {
  it('match userName case-insensitively and externalId case-exactly (RFC 7643 section 4.1.1)', async () => {
    expect(await select('userName eq "ANN@People.Example"')).toEqual(['ann'])
    expect(await select('externalId eq "E-100"')).toEqual(['ann'])
    expect(await select('externalId eq "e-100"')).toEqual(['bob'])
    expect(await select('externalId pr')).toEqual(['ann', 'bob', 'dan'])
    expect(await select('not (externalId pr)')).toEqual(['cat'])
    expect(await select('externalId ne "E-100"')).toEqual(['bob', 'cat', 'dan'])
  })

  it('match any address of emails, case-insensitively, and value filters on one address', async () => {
    expect(await select('emails.value eq "ann@work.example"')).toEqual(['ann'])
    expect(await select('emails eq "ANN@HOME.EXAMPLE"')).toEqual(['ann'])
    expect(await select('emails co "home.example"')).toEqual(['ann', 'dan'])
    expect(await select('emails.type eq "work"')).toEqual(['ann', 'bob'])
    expect(await select('emails pr')).toEqual(['ann', 'bob', 'dan'])
    expect(await select('emails[type eq "work" and primary eq true]')).toEqual(['ann'])
    // The same conditions outside a value path may be met by two different addresses.
    expect(await select('emails[type eq "home" and value sw "dan"]')).toEqual(['dan'])
    expect(await select('emails.type eq "home" and emails.value sw "ann@w"')).toEqual(['ann'])
    expect(await select('emails[type eq "home" and value sw "ann@w"]')).toEqual([])
  })

  it('match active, and meta.lastModified with gt ge lt le', async () => {
    expect(await select('active eq true')).toEqual(['ann', 'cat'])
    expect(await select('active eq false')).toEqual(['bob', 'dan'])
    expect(await select('active ne true')).toEqual(['bob', 'dan'])
    const bob = users.bob.meta.lastModified
    expect(await select(`meta.lastModified gt "${bob}"`)).toEqual(['cat', 'dan'])
    expect(await select(`meta.lastModified ge "${bob}"`)).toEqual(['bob', 'cat', 'dan'])
    expect(await select(`meta.lastModified lt "${bob}"`)).toEqual(['ann'])
    expect(await select(`meta.lastModified le "${bob}"`)).toEqual(['ann', 'bob'])
    expect(await select(`meta.lastModified eq "${bob}"`)).toEqual(['bob'])
    expect(await select(`meta.created lt "${users.cat.meta.created}" and active eq false`)).toEqual(['bob'])
  })

  it('order strings with gt ge lt le, and combine with and, or, not and grouping', async () => {
    expect(await select('userName gt "BOB@people.example"')).toEqual(['cat', 'dan'])
    expect(await select('userName le "bob@people.example"')).toEqual(['ann', 'bob'])
    expect(await select('(active eq true or externalId eq "E-200") and not (userName sw "cat")')).toEqual(['ann', 'dan'])
    expect(await select('active eq false and (emails.type eq "home" or displayName pr)')).toEqual(['dan'])
  })

  it('select the same users as SCIMMY\'s filter engine on what it compares like us', async () => {
    const all = await scim('GET', '/scim/v2/Users?count=1000')
    // SCIMMY's value filters need the list present; an unassigned emails is an empty one to it.
    const everyone = all.body.Resources.map((u: Record<string, unknown>) => ({ emails: [], ...u }))
    // SCIMMY compares strings case-sensitively, so these use the stored letter case.
    for (const f of ['externalId eq "E-100"', 'active eq false', 'emails[type eq "work"]', 'emails.value ew "home.example"', 'not (active eq true) or displayName pr']) {
      const theirs = new SCIMMY.Types.Filter(f).match(everyone).map((u: { id: string }) => u.id)
      const ours = (await scim('GET', `/scim/v2/Users?count=1000&filter=${encodeURIComponent(f)}`)).body.Resources.map((u: { id: string }) => u.id)
      expect(ours, f).toEqual(theirs)
      expect(ours.length, f).toBeGreaterThan(0)
    }
  })
})

describe('paging and attributes', () => {
  it('pages with startIndex and count, reporting totalResults, itemsPerPage and startIndex', async () => {
    const page = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName ew "@people.example"')}&startIndex=2&count=2`)
    expect(page.body).toMatchObject({ schemas: [LIST], totalResults: 4, startIndex: 2, itemsPerPage: 2 })
    expect(page.body.Resources.map((u: { id: string }) => u.id)).toEqual([users.bob.id, users.cat.id])
    const past = await scim('GET', '/scim/v2/Users?startIndex=10&count=5')
    expect(past.body).toMatchObject({ totalResults: 4, startIndex: 10, itemsPerPage: 0, Resources: [] })
  })

  it('returns only the attributes asked for, and always id and schemas', async () => {
    const r = await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "ann@people.example"')}&attributes=userName,name.givenName,emails`)
    expect(r.body.Resources).toEqual([
      {
        schemas: [USER_SCHEMA],
        id: users.ann.id,
        userName: 'ann@people.example',
        name: { givenName: 'ann' },
        emails: [{ value: 'Ann@Work.example', type: 'work', primary: true }, { value: 'ann@home.example', type: 'home' }],
      },
    ])
    const one = await scim('GET', `/scim/v2/Users/${users.ann.id}?attributes=${encodeURIComponent(`${USER_SCHEMA}:externalId,ACTIVE,id`)}`)
    expect(one.body).toEqual({ schemas: [USER_SCHEMA], id: users.ann.id, externalId: 'E-100', active: true })
    const without = await scim('GET', `/scim/v2/Users/${users.ann.id}?excludedAttributes=permissions,emails,meta.location,name.familyName,id,schemas`)
    expect(without.body.permissions).toBeUndefined()
    expect(without.body.emails).toBeUndefined()
    expect(without.body.name).toEqual({ givenName: 'ann' })
    expect(Object.keys(without.body.meta)).not.toContain('location')
    expect(without.body).toMatchObject({ schemas: [USER_SCHEMA], id: users.ann.id, userName: 'ann@people.example', meta: { version: expect.any(String) } })
  })

  it('answers POST /Users/.search like GET, from a SearchRequest body', async () => {
    const r = await scim('POST', '/scim/v2/Users/.search', {
      body: { schemas: [SEARCH], filter: 'active eq false', attributes: ['userName', 'active'], startIndex: 1, count: 1, sortBy: 'userName' },
    })
    expect(r.status, r.text).toBe(200)
    expect(r.body).toEqual({
      schemas: [LIST],
      totalResults: 2,
      startIndex: 1,
      itemsPerPage: 1,
      Resources: [{ schemas: [USER_SCHEMA], id: users.bob.id, userName: 'bob@people.example', active: false }],
    })
    expectScimError(await scim('POST', '/scim/v2/Users/.search', { body: { filter: 'active eq false' } }), 400, 'invalidValue')
    expectScimError(await scim('POST', '/scim/v2/Users/.search', { body: { schemas: [SEARCH], filter: 'active gt 1' } }), 400, 'invalidFilter')
    expectScimError(await scim('POST', '/scim/v2/Users/.search', { body: { schemas: [SEARCH], count: 'all' } }), 400, 'invalidValue')
  })
})

describe('discovery', () => {
  it('describes what is supported in ServiceProviderConfig', async () => {
    const r = await scim('GET', '/scim/v2/ServiceProviderConfig')
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/)
    expect(r.body).toMatchObject({
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
      patch: { supported: true },
      bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
      filter: { supported: true, maxResults: 1000 },
      changePassword: { supported: false },
      sort: { supported: false },
      etag: { supported: true },
      authenticationSchemes: [expect.objectContaining({ type: 'oauthbearertoken' })],
    })
    // The documented maximum is the page size that holds.
    const big = await scim('GET', '/scim/v2/Users?count=5000')
    expect(big.body.itemsPerPage).toBeLessThanOrEqual(r.body.filter.maxResults)
  })

  it('lists the User resource type and schema only, each readable by id', async () => {
    const types = await scim('GET', '/scim/v2/ResourceTypes')
    expect(types.body).toMatchObject({ schemas: [LIST], totalResults: 1, Resources: [{ id: 'User', endpoint: '/Users', schema: USER_SCHEMA, schemaExtensions: [] }] })
    expect((await scim('GET', '/scim/v2/ResourceTypes/User')).body).toEqual(types.body.Resources[0])
    expectScimError(await scim('GET', '/scim/v2/ResourceTypes/Group'), 404)

    const schemas = await scim('GET', '/scim/v2/Schemas')
    expect(schemas.body).toMatchObject({ schemas: [LIST], totalResults: 1 })
    const user = schemas.body.Resources[0]
    expect(user.id).toBe(USER_SCHEMA)
    expect((await scim('GET', `/scim/v2/Schemas/${USER_SCHEMA}`)).body).toEqual(user)
    expectScimError(await scim('GET', '/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group'), 404)
    const attr = (name: string) => user.attributes.find((a: { name: string }) => a.name === name)
    expect(attr('userName')).toMatchObject({ type: 'string', required: true, caseExact: false, mutability: 'immutable', uniqueness: 'server' })
    expect(attr('externalId')).toMatchObject({ caseExact: true })
    expect(attr('active')).toMatchObject({ type: 'boolean' })
    expect(attr('emails').subAttributes.map((a: { name: string }) => a.name)).toEqual(['value', 'type', 'primary'])
    expect(attr('department').canonicalValues).toContain('finance')
  })

  it('is a schema SCIMMY accepts, and every user answered fits it', async () => {
    const schema = (await scim('GET', `/scim/v2/Schemas/${USER_SCHEMA}`)).body
    // Rebuilt as SCIMMY attributes (with its own id and meta left to it), then every user coerced through it.
    const toAttribute = (a: any): any =>
      new SCIMMY.Types.Attribute(a.type, a.name, {
        multiValued: a.multiValued,
        required: false,
        ...(a.caseExact !== undefined ? { caseExact: a.caseExact } : {}),
        ...(a.canonicalValues ? { canonicalValues: a.canonicalValues } : {}),
        mutable: a.mutability !== 'readOnly' && a.mutability !== 'immutable' ? true : false,
        returned: a.returned === 'always' ? 'always' : true,
      }, (a.subAttributes ?? []).map(toAttribute))
    const definition = new SCIMMY.Types.SchemaDefinition('User', USER_SCHEMA, schema.description, schema.attributes.filter((a: any) => a.name !== 'id').map(toAttribute))
    const all = (await scim('GET', '/scim/v2/Users?count=1000')).body.Resources
    for (const u of all) {
      const { lastSignInAt, ...assigned } = u
      expect(lastSignInAt).toBeNull()
      expect(definition.coerce(u, 'out')).toEqual(assigned)
    }
  })

  it('refuses a filter on them: 403 on ServiceProviderConfig (RFC 7644 section 4), 400 on the lists', async () => {
    const f = `?filter=${encodeURIComponent('patch.supported eq true')}`
    expectScimError(await scim('GET', `/scim/v2/ServiceProviderConfig${f}`), 403)
    expectScimError(await scim('GET', `/scim/v2/ResourceTypes${f}`), 400, 'invalidFilter')
    expectScimError(await scim('GET', `/scim/v2/Schemas${f}`), 400, 'invalidFilter')
  })

  it('requires the SCIM token and origin like every SCIM call', async () => {
    for (const path of ['/scim/v2/ServiceProviderConfig', '/scim/v2/ResourceTypes', '/scim/v2/Schemas']) {
      expectScimError(await request(env.baseUrl, 'GET', path, { headers: { 'x-request-origin': ORIGIN } }), 401)
      expectScimError(await request(env.baseUrl, 'GET', path, { token }), 401)
    }
  })
})
