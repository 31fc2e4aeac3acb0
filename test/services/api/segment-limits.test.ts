import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compileFor, countSegmentMembers, readSegmentPage } from '../../../shared/clickhouse/segment-repository.js'
import { createSegment } from '../../../shared/db/repositories/segment-repository.js'
import type { Filter } from '../../../shared/domain/segment-filter.js'
import { filterLimitProblem, SegmentFilterLimits as L } from '../../../shared/domain/segment-limits.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
  // Six users, so that a count tries the plan over candidates too, whose query holds the filter twice.
  await env.writeAndWait(ws.key, '/users/track', {
    attributes: Array.from({ length: 6 }, (_, i) => ({ external_id: `u${i + 1}`, country: 'US' })),
    events: [{ external_id: 'u1', name: 'opened', time: new Date().toISOString() }],
  })
})
afterAll(async () => {
  await env?.close()
})

const createSeg = (name: string, filter: unknown) => env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name, filter })
const readSeg = (id: string) => env.admin('GET', `/admin/v1/workspaces/${ws.id}/segments/${id}`)
const bytesOf = (f: unknown) => Buffer.byteLength(JSON.stringify(f))

/** Matches u1, u2 and u3: what every filter here holds besides rules matching nobody. */
const THREE_USERS: Filter = { field: 'external_id', op: 'in', value: ['u1', 'u2', 'u3'] }
const noEvent = (i: number): Filter => ({ custom_event: `never-sent-${i}`, op: 'count_gte', value: 1, within_days: 30 })
const noAttribute = (i: number, value: string): Filter => ({ custom_attribute: `missing-${i}`, op: 'eq', value })
const noListed = (i: number, numbers: number): Filter => ({
  custom_attribute: `missing-${i}`,
  op: 'in',
  value: [`s${i}`, true, ...Array.from({ length: numbers }, (_, j) => j)],
})

/**
 * `depth` levels of any and all, alternating from an `any` at the top, the leaves spread over the
 * levels in order (every level holds at least one). Rules matching nobody below the top leave
 * the top's first rule to decide.
 */
function nested(leaves: Filter[], depth: number): Filter {
  const perLevel = Math.ceil(leaves.length / depth)
  let inner: Filter | undefined
  for (let level = depth - 1; level >= 0; level--) {
    const mine = leaves.slice(level * perLevel, (level + 1) * perLevel)
    const members = inner ? [...mine, inner] : mine
    inner = level % 2 === 0 ? { any: members } : { all: members }
  }
  return inner!
}

/** THREE_USERS, `countRules` event rules and `rest` more rules from `make`, nested `depth` deep. */
function filterOf(opts: { countRules: number; rest: number; depth: number; make: (i: number) => Filter }): Filter {
  return nested([THREE_USERS, ...Array.from({ length: opts.countRules }, (_, i) => noEvent(i)), ...Array.from({ length: opts.rest }, (_, i) => opts.make(i))], opts.depth)
}

/** The most conditions, count rules and nesting, with string values padded to just under the byte limit. */
function atTheByteLimit(): Filter {
  const shape = { countRules: L.countRules, rest: L.conditions - 1 - L.countRules, depth: L.depth }
  const base = bytesOf(filterOf({ ...shape, make: (i) => noAttribute(i, '') }))
  const pad = Math.floor((L.bytes - base) / shape.rest)
  return filterOf({ ...shape, make: (i) => noAttribute(i, 'p'.repeat(pad)) })
}

/** The same shape with `in` lists of `numbers` numbers each (a mixed-type list compiles to the longest SQL). */
const withLists = (numbers: number) => filterOf({ countRules: L.countRules, rest: L.conditions - 1 - L.countRules, depth: L.depth, make: (i) => noListed(i, numbers) })

/** The longest lists whose filter still compiles within the limit. */
function listLengthAtTheCompiledLimit(): number {
  let k = 0
  while (!filterLimitProblem(withLists(k + 1))) k++
  return k
}

describe('segment filters at the limits', () => {
  it('creates the largest filters the limits allow, and counts and pages them', async () => {
    const k = listLengthAtTheCompiledLimit()
    const largest: [string, Filter][] = [
      ['at the byte limit', atTheByteLimit()],
      ['at the compiled-size limit', withLists(k)],
    ]
    for (const [name, filter] of largest) {
      expect(filterLimitProblem(filter), name).toBeUndefined()
      const created = await createSeg(name, filter)
      expect(created.status, `${name}: ${created.text.slice(0, 200)}`).toBe(201)
      const read = await readSeg(created.body.segment_id)
      expect(read.status, `${name}: ${read.text.slice(0, 200)}`).toBe(200)
      expect(read.body.size, name).toBe(3)
      // Each plan of the count, and the export's pages, evaluate it.
      for (const plan of ['candidates', 'all'] as const) expect(await countSegmentMembers(env.clickhouse, ws.id, filter, { plan }), `${name} ${plan}`).toBe(3)
      const page = await readSegmentPage(env.clickhouse, ws.id, compileFor(env.clickhouse, filter), { after: '0', limit: 10 })
      expect(page.map((m) => JSON.parse(m.record).external_id).sort(), name).toEqual(['u1', 'u2', 'u3'])
    }
    // Both are really at their limits.
    expect(bytesOf(largest[0][1])).toBeGreaterThan(L.bytes - 200)
    expect(filterLimitProblem(withLists(k + 1))).toMatch(/^compiles to a query of [\d,]+ bytes; at most 102,400 are allowed/)
  })

  it('refuses a filter just over each limit with a 400 naming it, and stores none of them', async () => {
    const small = (i: number): Filter => ({ field: 'country', op: 'eq', value: `C${i}` })
    const cases: [string, unknown, string | RegExp][] = [
      [
        'conditions',
        filterOf({ countRules: 0, rest: L.conditions, depth: 2, make: small }),
        'filter: has 101 conditions; at most 100 are allowed (a condition is any rule but all, any and not)',
      ],
      ['count rules', filterOf({ countRules: L.countRules + 1, rest: 0, depth: 1, make: small }), 'filter: has 21 custom_event and purchase conditions; at most 20 are allowed'],
      ['depth', filterOf({ countRules: 0, rest: 10, depth: L.depth + 1, make: small }), 'filter: nests all, any and not 11 levels deep; at most 10 are allowed'],
      ['bytes', { custom_attribute: 'note', op: 'eq', value: 'x'.repeat(L.bytes) }, /^filter: is 32,8\d\d bytes of JSON; at most 32,768 are allowed$/],
      ['compiled size', withLists(listLengthAtTheCompiledLimit() + 1), /^filter: compiles to a query of 10\d,\d{3} bytes; at most 102,400 are allowed \(use fewer conditions or shorter value lists\)$/],
      // Refused at once, before its 50,000 rules are validated one by one.
      ['50,000 conditions', { any: Array.from({ length: 50_000 }, (_, i) => small(i)) }, 'filter: has 50,000 conditions; at most 100 are allowed (a condition is any rule but all, any and not)'],
    ]
    for (const [name, filter, message] of cases) {
      const r = await createSeg(`over ${name}`, filter)
      expect(r.status, name).toBe(400)
      expect(r.body.message, name).toMatch(message)
      expect(r.body.errors, name).toEqual([r.body.message])
    }
    const stored = await env.ctx.pg.query<{ name: string }>('SELECT name FROM segments WHERE workspace_id = $1 AND name LIKE $2', [ws.id, 'over %'])
    expect(stored.rows).toEqual([])
  })

  it('answers 409, not a ClickHouse failure, for a segment stored before the limits that exceeds them', async () => {
    const legacy = await createSegment(env.ctx.pg, { workspaceId: ws.id, name: 'legacy', filter: { any: Array.from({ length: 50_000 }, () => THREE_USERS) } })
    const read = await readSeg(legacy!.id)
    expect(read.status).toBe(409)
    expect(read.body.message).toBe(
      `segment ${legacy!.id} cannot be counted: its filter has 50,000 conditions; at most 100 are allowed (a condition is any rule but all, any and not); create it anew within the limits`,
    )
    const exported = await env.call('POST', '/users/export/segment', { key: ws.key, body: { segment_id: legacy!.id, fields_to_export: ['external_id'] } })
    expect(exported.status).toBe(409)
    expect(exported.body.message).toMatch(new RegExp(`^segment ${legacy!.id} cannot be exported: its filter has 50,000 conditions`))
  })
})
