import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents, type EventRow } from '../../../shared/clickhouse/event-repository.js'
import { countSegmentMembers, compileFor, readSegmentPage, workspaceRowsNow, workspaceRowsRecently } from '../../../shared/clickhouse/segment-repository.js'
import { writeSnapshots, writeTombstones } from '../../../shared/clickhouse/snapshot-repository.js'
import { Filter } from '../../../shared/domain/segment-filter.js'
import { compileSegmentFilter, globalControlGroupFilter } from '../../../shared/domain/segment-sql.js'
import type { UserRecord } from '../../../shared/domain/user-record.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

const compile = (f: Filter) => compileSegmentFilter(f, { eventsTable: 'db.events', overridesTable: 'db.profile_overrides' })

describe('segment filter compiler (pure)', () => {
  it('binds every value as a typed parameter and never writes it into the SQL', () => {
    const hostile = "x' OR 1=1 --"
    const c = compile({
      all: [
        { field: 'email', op: 'eq', value: hostile },
        { custom_attribute: hostile, op: 'in', value: [hostile, 3, true] },
        { custom_event: hostile, op: 'count_gte', value: 2, within_days: 7 },
        { subscription_group: hostile, state: 'subscribed' },
      ],
    })
    expect(c.where).not.toContain(hostile)
    expect(Object.values(c.params)).toEqual(expect.arrayContaining([hostile, [hostile], [3], [1], 2, 7]))
    for (const name of Object.keys(c.params)) expect(c.where).toMatch(new RegExp(`\\{${name}:[A-Za-z0-9()]+\\}`))
  })

  it('writes the empty `all` as true and nests combinators with parentheses', () => {
    expect(compile({ all: [] }).where).toBe('1')
    const c = compile({ not: { any: [{ random_bucket: { lt: 10 } }, { random_bucket: { gte: 20 } }] } })
    expect(c.where).toBe('(NOT ((random_bucket < {f0:UInt16}) OR (random_bucket >= {f1:UInt16})))')
    expect(c.params).toEqual({ f0: 10, f1: 20 })
  })

  it('counts zero-satisfied event rules as "not among those failing", others as "among those passing"', () => {
    const lt = compile({ custom_event: 'open', op: 'count_lt', value: 2 })
    expect(lt.where).toMatch(/^\(profile_id GLOBAL NOT IN \(SELECT .* AS owner FROM db\.events AS e .* HAVING owner > \{after:UInt64\} AND NOT \(uniqExact\(e\.event_id\) < \{f1:UInt64\}\)\)\)$/s)
    const gt = compile({ custom_event: 'open', op: 'count_gt', value: 0 })
    expect(gt.where).toMatch(/^\(profile_id GLOBAL IN \(SELECT .* HAVING owner > \{after:UInt64\} AND uniqExact\(e\.event_id\) > \{f1:UInt64\}\)\)$/s)
    const anyProduct = compile({ purchase: '*', op: 'count_gte', value: 1 })
    expect(anyProduct.where).not.toContain('name =')
    expect(anyProduct.where).toContain("kind = 'purchase'")
  })

  it('makes the global control group a random bucket bound of percent * 100', () => {
    expect(globalControlGroupFilter(12.5)).toEqual({ random_bucket: { lt: 1250 } })
  })
})

describe('segment filter validation messages', () => {
  const problem = (f: unknown) => {
    const r = Filter.safeParse(f)
    return r.success ? undefined : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
  }

  it('names the unknown operator, field or rule and where it is', () => {
    expect(problem({ field: 'email', op: 'like', value: 'x' })).toEqual([expect.stringMatching(/^op: unknown operator "like"; expected one of eq, neq/)])
    expect(problem({ all: [{ field: 'shoe_size', op: 'eq', value: 1 }] })).toEqual([expect.stringMatching(/^all\.0\.field: unknown profile field "shoe_size"/)])
    expect(problem({ any: [{ colour: 'red' }] })).toEqual([expect.stringMatching(/^any\.0: unknown filter rule \(keys: colour\)/)])
    expect(problem({ custom_event: 'open', op: 'count_gt', value: 1.5 })).toEqual(['value: must be a whole number of occurrences'])
    expect(problem({ field: 'email', op: 'eq' })).toEqual(['value: op eq needs a value'])
    expect(problem({ custom_attribute: 'n', op: 'gt', value: true })).toEqual([expect.stringMatching(/^value: op gt needs a number or a string/)])
    expect(problem({ any: [] })).toEqual(['any: needs at least one filter'])
    expect(problem({ not: { email_subscribe: 'maybe' } })).toEqual([expect.stringMatching(/^not\.email_subscribe: unknown subscription state "maybe"/)])
    expect(problem('all')).toEqual([expect.stringMatching(/^: a filter must be an object/)])
  })

  it('accepts every rule kind of operator.md section 3', () => {
    expect(problem(ALL_KINDS)).toBeUndefined()
  })
})

const ALL_KINDS: Filter = {
  all: [
    { field: 'email', op: 'exists' },
    { custom_attribute: 'visits', op: 'gte', value: 1 },
    { custom_event: 'open', op: 'count_gte', value: 1, within_days: 30 },
    { purchase: '*', op: 'count_eq', value: 0 },
    { random_bucket: { gte: 0, lt: 10000 } },
    { email_subscribe: 'subscribed' },
    { push_subscribe: 'opted_in' },
    { subscription_group: 'g1', state: 'subscribed' },
    { not: { any: [{ field: 'country', op: 'eq', value: 'DE' }] } },
  ],
}

describe('segment membership on ClickHouse', () => {
  let env: TestEnv
  const ws = 'ws-segments'
  const recent = new Date(Date.now() - 2 * 86400_000).toISOString()
  const old = '2020-01-01T00:00:00.000Z'

  const user = (id: number, extra: Partial<UserRecord>): UserRecord => ({
    created_at: `2024-01-0${id}T00:00:00.000Z`,
    service_id: `svc-${id}`,
    external_id: `user-${id}`,
    random_bucket: id * 1000,
    ...extra,
  })
  const event = (profile: number, id: string, kind: 'event' | 'purchase', name: string, time: string): EventRow => ({
    workspace_id: ws, profile_id: profile, event_id: id, kind, name, app_id: 'app', time, properties: '{}', currency: 'USD', price: 1, quantity: 1,
  })

  beforeAll(async () => {
    env = await startTestEnv()
    const records: UserRecord[] = [
      user(1, {
        email: 'Ann@Example.com', country: 'FR', email_subscribe: 'subscribed', push_subscribe: 'opted_in',
        custom_attributes: { visits: 5, tags: ['vip', 'beta'], signup: '2024-05-01', pro: true },
        subscription_groups: [{ subscription_group_id: 'g1', subscription_state: 'subscribed' }],
      }),
      user(2, {
        email: 'bob@example.org', country: 'DE', email_subscribe: 'unsubscribed',
        custom_attributes: { visits: 12, tags: ['beta'], signup: '2023-02-01', pro: false },
        subscription_groups: [{ subscription_group_id: 'g1', subscription_state: 'unsubscribed' }],
      }),
      user(3, { country: 'FR', custom_attributes: { visits: '7' } }),
      user(4, { email: 'gone@example.com' }),
    ]
    await writeSnapshots(env.clickhouse, records.map((r, i) => ({ workspace_id: ws, profile_id: i + 1, version: 1, random_bucket: r.random_bucket, record: r })))
    await writeSnapshots(env.clickhouse, [{ workspace_id: 'other-ws', profile_id: 1, version: 1, random_bucket: 0, record: user(1, {}) }])
    await writeTombstones(env.clickhouse, ws, [{ id: 4, version: 2 }])
    await insertEvents(env.clickhouse, [
      event(1, 'e1', 'event', 'open', recent),
      event(1, 'e2', 'event', 'open', old),
      event(1, 'e2', 'event', 'open', old),
      event(2, 'e3', 'event', 'open', recent),
      event(2, 'p1', 'purchase', 'sku-1', recent),
      event(3, 'p2', 'purchase', 'sku-2', old),
    ])
  })
  afterAll(async () => {
    await env.close()
  })

  const members = async (filter: Filter) => {
    const rows = await readSegmentPage(env.clickhouse, ws, compileFor(env.clickhouse, filter), { after: '0', limit: 100 })
    for (const plan of ['auto', 'candidates', 'all'] as const) {
      expect(await countSegmentMembers(env.clickhouse, ws, filter, { plan }), `${plan} ${JSON.stringify(filter)}`).toBe(rows.length)
    }
    return rows.map((r) => Number(r.profile_id))
  }

  it('covers every user of the workspace with `all: []`, never deleted or foreign ones', async () => {
    expect(await members({ all: [] })).toEqual([1, 2, 3])
  })

  it('filters standard fields with each operator', async () => {
    expect(await members({ field: 'country', op: 'eq', value: 'FR' })).toEqual([1, 3])
    expect(await members({ field: 'country', op: 'neq', value: 'FR' })).toEqual([2])
    expect(await members({ field: 'email', op: 'exists' })).toEqual([1, 2])
    expect(await members({ field: 'email', op: 'not_exists' })).toEqual([3])
    expect(await members({ field: 'email', op: 'contains', value: 'example.COM' })).toEqual([1])
    expect(await members({ field: 'country', op: 'in', value: ['DE', 'IT'] })).toEqual([2])
    expect(await members({ field: 'created_at', op: 'gte', value: '2024-01-02' })).toEqual([2, 3])
    expect(await members({ field: 'random_bucket', op: 'lt', value: 2500 })).toEqual([1, 2])
  })

  it('filters custom attributes by the type of the value asked for', async () => {
    expect(await members({ custom_attribute: 'visits', op: 'gt', value: 6 })).toEqual([2])
    expect(await members({ custom_attribute: 'visits', op: 'eq', value: '7' })).toEqual([3])
    expect(await members({ custom_attribute: 'tags', op: 'contains', value: 'vip' })).toEqual([1])
    expect(await members({ custom_attribute: 'tags', op: 'in', value: ['beta'] })).toEqual([1, 2])
    expect(await members({ custom_attribute: 'signup', op: 'lt', value: '2024-01-01' })).toEqual([2])
    expect(await members({ custom_attribute: 'pro', op: 'eq', value: true })).toEqual([1])
    expect(await members({ custom_attribute: 'pro', op: 'not_exists' })).toEqual([3])
  })

  it('counts custom events and purchases, all time or within days', async () => {
    expect(await members({ custom_event: 'open', op: 'count_eq', value: 2 })).toEqual([1])
    expect(await members({ custom_event: 'open', op: 'count_eq', value: 1, within_days: 30 })).toEqual([1, 2])
    expect(await members({ custom_event: 'open', op: 'count_lt', value: 1 })).toEqual([3])
    expect(await members({ custom_event: 'open', op: 'count_lte', value: 1 })).toEqual([2, 3])
    expect(await members({ purchase: '*', op: 'count_gte', value: 1 })).toEqual([2, 3])
    expect(await members({ purchase: 'sku-2', op: 'count_gt', value: 0 })).toEqual([3])
    expect(await members({ purchase: '*', op: 'count_eq', value: 0, within_days: 30 })).toEqual([1, 3])
  })

  it('filters random buckets, subscription states and subscription groups, and combines rules', async () => {
    expect(await members({ random_bucket: { gte: 2000, lt: 3000 } })).toEqual([2])
    expect(await members(globalControlGroupFilter(25))).toEqual([1, 2])
    expect(await members({ email_subscribe: 'subscribed' })).toEqual([1])
    expect(await members({ push_subscribe: 'opted_in' })).toEqual([1])
    expect(await members({ subscription_group: 'g1', state: 'unsubscribed' })).toEqual([2])
    expect(await members({ any: [{ field: 'country', op: 'eq', value: 'DE' }, { custom_attribute: 'visits', op: 'eq', value: '7' }] })).toEqual([2, 3])
    expect(await members({ not: { field: 'country', op: 'eq', value: 'FR' } })).toEqual([2])
    expect(await members(ALL_KINDS)).toEqual([1])
  })

  it('answers the same from the field columns of rows written before they existed, worked out from the record', async () => {
    const tricky: Partial<UserRecord>[] = [
      { first_name: 'Zoë "Q" \\ back/slash', email: 'a/b@example.com', country: 'FR' },
      { first_name: '2024-05-01', last_name: '123', email: 'Ann@Example.com' },
      { first_name: 'Zoë "Q" \\ back/slash', language: 'fr' },
    ]
    const written = 'ws-fields-written'
    const raw = 'ws-fields-raw'
    await writeSnapshots(env.clickhouse, tricky.map((t, i) => ({ workspace_id: written, profile_id: i + 1, version: 1, random_bucket: (i + 1) * 1000, record: user(i + 1, t) })))
    // As a row stored before the field columns: only the record, the columns from their default.
    await env.clickhouse.client.insert({
      table: `${env.clickhouse.database}.profile_snapshots`,
      columns: ['workspace_id', 'profile_id', 'version', 'deleted', 'random_bucket', 'record'],
      values: tricky.map((t, i) => ({ workspace_id: raw, profile_id: i + 1, version: 1, deleted: 0, random_bucket: (i + 1) * 1000, record: JSON.stringify(user(i + 1, t)) })),
      format: 'JSONEachRow',
    })
    const filters: [Filter, number[]][] = [
      [{ field: 'first_name', op: 'eq', value: 'Zoë "Q" \\ back/slash' }, [1, 3]],
      [{ field: 'first_name', op: 'lt', value: '2024-06-01' }, [2]],
      [{ field: 'last_name', op: 'eq', value: '123' }, [2]],
      [{ field: 'last_name', op: 'eq', value: 123 }, []],
      [{ field: 'email', op: 'contains', value: 'A/B@' }, [1]],
      [{ field: 'country', op: 'not_exists' }, [2, 3]],
      [{ field: 'language', op: 'in', value: ['fr', 'de'] }, [3]],
      [{ field: 'random_bucket', op: 'gte', value: 2000 }, [2, 3]],
      [{ field: 'created_at', op: 'lt', value: '2024-01-02' }, [1]],
      // Equality decided on the column's text where the value's JSON has no escapes.
      [{ field: 'email', op: 'eq', value: 'a/b@example.com' }, [1]],
      [{ field: 'language', op: 'eq', value: 'fr' }, [3]],
      [{ field: 'first_name', op: 'neq', value: 'Zoë "Q" \\ back/slash' }, [2]],
      [{ field: 'first_name', op: 'eq', value: '2024-05-01T00:00:00Z' }, [2]],
      [{ field: 'email', op: 'eq', value: 'ann@example.com' }, []],
    ]
    for (const [filter, expected] of filters) {
      for (const ws of [written, raw]) {
        const rows = await readSegmentPage(env.clickhouse, ws, compileFor(env.clickhouse, filter), { after: '0', limit: 100 })
        expect(rows.map((r) => Number(r.profile_id)), `${ws} ${JSON.stringify(filter)}`).toEqual(expected)
        expect(await countSegmentMembers(env.clickhouse, ws, filter)).toBe(expected.length)
      }
    }
  })

  it('counts over the candidates only by their newest rows, whichever way the count goes', async () => {
    const versioned = 'ws-versions'
    const at = (id: number, version: number, country: string) => ({ workspace_id: versioned, profile_id: id, version, random_bucket: id, record: user(1, { external_id: `v-${id}`, country }) })
    // 1: was FR, now DE; 2: was DE, now FR; 3: FR, then deleted; 4-40: US, with an older FR row for
    // 4-5; each version in a part of its own, so nothing is merged yet.
    await writeSnapshots(env.clickhouse, [at(1, 1, 'FR'), at(2, 1, 'DE'), at(3, 1, 'FR'), ...Array.from({ length: 37 }, (_, i) => at(i + 4, 1, i < 2 ? 'FR' : 'US'))])
    await writeSnapshots(env.clickhouse, [at(1, 2, 'DE'), at(2, 2, 'FR'), at(4, 2, 'US'), at(5, 2, 'US')])
    await writeTombstones(env.clickhouse, versioned, [{ id: 3, version: 2 }])
    const count = (filter: Filter, plan: 'auto' | 'candidates' | 'all') => countSegmentMembers(env.clickhouse, versioned, filter, { plan })
    for (const plan of ['auto', 'candidates', 'all'] as const) {
      // FR: few candidates (1-5), one member; US: most rows (the auto count falls back to all).
      expect(await count({ field: 'country', op: 'eq', value: 'FR' }, plan), plan).toBe(1)
      expect(await count({ field: 'country', op: 'eq', value: 'DE' }, plan), plan).toBe(1)
      expect(await count({ field: 'country', op: 'eq', value: 'US' }, plan), plan).toBe(37)
      expect(await count({ not: { field: 'country', op: 'eq', value: 'US' } }, plan), plan).toBe(2)
      expect(await count({ all: [] }, plan), plan).toBe(39)
    }
  })

  it('counts exactly whatever workspace row count sizes the plan, and reuses a recent one', async () => {
    const sized = 'ws-sized'
    const row = (id: number, country: string) => ({ workspace_id: sized, profile_id: id, version: 1, random_bucket: id, record: user(1, { external_id: `s-${id}`, country }) })
    await writeSnapshots(env.clickhouse, Array.from({ length: 30 }, (_, i) => row(i + 1, i < 3 ? 'FR' : 'US')))
    const fr = { field: 'country', op: 'eq', value: 'FR' } as const
    // A stale figure either way: too small a set limit falls back to every row, too large keeps the candidates.
    for (const rows of [0, 1, 1e9]) expect(await countSegmentMembers(env.clickhouse, sized, fr, { workspaceRows: async () => rows }), String(rows)).toBe(3)

    const recently = workspaceRowsRecently(env.clickhouse)
    expect(await recently(sized)).toBe(30)
    await writeSnapshots(env.clickhouse, [row(31, 'FR'), row(32, 'FR')])
    expect(await recently(sized)).toBe(30)
    expect(await workspaceRowsNow(env.clickhouse)(sized)).toBe(32)
    expect(await workspaceRowsRecently(env.clickhouse, 0)(sized)).toBe(32)
    expect(await countSegmentMembers(env.clickhouse, sized, fr, { workspaceRows: recently })).toBe(5)
  })

  it('pages in profile id order after a cursor', async () => {
    const compiled = compileFor(env.clickhouse, { all: [] })
    const first = await readSegmentPage(env.clickhouse, ws, compiled, { after: '0', limit: 2 })
    const second = await readSegmentPage(env.clickhouse, ws, compiled, { after: first[1].profile_id, limit: 2 })
    expect(first.map((r) => r.profile_id)).toEqual(['1', '2'])
    expect(second.map((r) => r.profile_id)).toEqual(['3'])
    expect(JSON.parse(second[0].record).service_id).toBe('svc-3')
  })

  it('reports the size through the operator API and refuses a bad filter with a 400 naming it', async () => {
    const w = await env.workspace()
    const bad = await env.admin('POST', `/admin/v1/workspaces/${w.id}/segments`, { name: 'bad', filter: { all: [{ field: 'email', op: 'like', value: 'x' }] } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/^filter\.all\.0\.op: unknown operator "like"/)
    await writeSnapshots(env.clickhouse, [
      { workspace_id: w.id, profile_id: 10, version: 1, random_bucket: 5, record: user(1, { country: 'FR' }) },
      { workspace_id: w.id, profile_id: 11, version: 1, random_bucket: 6, record: user(2, { country: 'DE' }) },
    ])
    const s = await env.admin('POST', `/admin/v1/workspaces/${w.id}/segments`, { name: 'fr', filter: { field: 'country', op: 'eq', value: 'FR' } })
    const got = await env.admin('GET', `/admin/v1/workspaces/${w.id}/segments/${s.body.segment_id}`)
    expect(got.body.size).toBe(1)
  })
})
