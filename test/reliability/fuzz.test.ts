import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startTestEnv, type HttpResult, type TestEnv } from '../helpers/harness.js'

// Property-based fuzzing of every endpoint's body: arbitrary JSON, valid bodies with fields
// mutated (wrong types, huge strings, deep nesting, unicode, null bytes, odd numbers), and raw
// bodies (malformed JSON, wrong content types, empty). No input may get a 5xx; every refusal is
// JSON with a `message` (SCIM: a SCIM error body with `detail`); and a refused request changes
// nothing: every table of the database reads back the same, and no job was queued.
//
// No worker runs, so every accepted request leaves its jobs waiting: the queue counts only move
// when something was accepted.

const RUNS = Number(process.env.FUZZ_RUNS ?? 60)
const ORIGIN = 'fuzz.example.com'
const SCIM_ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error'

let env: TestEnv
let ws: { id: string; key: string; name: string }
/** A second workspace, target of the operator's PUTs, so that fuzzed settings never throttle `ws`. */
let scratch: { id: string; key: string }
let scimToken: string
let scimUserId: string
let emailGroup: string
let smsGroup: string
let segmentId: string
let tables: string[]
let scimUsers = 0

type Auth = 'key' | 'admin' | 'scim'
interface Endpoint {
  method: 'POST' | 'PUT' | 'PATCH'
  path: () => string
  auth: Auth
  /** A body the endpoint accepts (some may be refused for their content: a duplicate name, a busy segment). */
  valid: () => unknown
}

/** How deep the JSON text nests (brackets outside strings). */
function jsonDepth(text: string): number {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '[' || c === '{') max = Math.max(max, ++depth)
    else if (c === ']' || c === '}') depth--
  }
  return max
}

/** An unpaired surrogate: JSON.stringify writes one as an escape (a pair stays as it is). */
const hasLoneSurrogate = (text: string) => /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/.test(text)

const iso = () => new Date(Date.now() - 60_000).toISOString()

/** Every endpoint that takes a body, by the route file that owns it. */
const endpoints: Record<string, Endpoint> = {
  // users-track.ts
  'POST /users/track': {
    method: 'POST',
    path: () => '/users/track',
    auth: 'key',
    valid: () => ({
      attributes: [{ external_id: 'fz-1', first_name: 'Ann', email: 'ann@example.com', counter: { inc: 1 }, tags: { add: ['a'] }, nested: { a: [1, 'b'] } }],
      events: [{ external_id: 'fz-1', name: 'opened', time: iso(), properties: { n: 1, s: 'x' } }],
      purchases: [{ external_id: 'fz-1', product_id: 'p1', currency: 'USD', price: 1.5, quantity: 2, time: iso(), properties: {} }],
    }),
  },
  // users-export-ids.ts
  'POST /users/export/ids': {
    method: 'POST',
    path: () => '/users/export/ids',
    auth: 'key',
    valid: () => ({ external_ids: ['fz-1'], user_aliases: [{ alias_name: 'n', alias_label: 'l' }], email_address: 'ann@example.com', fields_to_export: ['external_id', 'email'] }),
  },
  // users-identity.ts
  'POST /users/merge': {
    method: 'POST',
    path: () => '/users/merge',
    auth: 'key',
    valid: () => ({
      merge_updates: [
        { identifier_to_merge: { external_id: 'fz-2' }, identifier_to_keep: { external_id: 'fz-1' } },
        { identifier_to_merge: { email: 'b@example.com', prioritization: ['unidentified'] }, identifier_to_keep: { user_alias: { alias_name: 'n', alias_label: 'l' } } },
      ],
    }),
  },
  'POST /users/identify': {
    method: 'POST',
    path: () => '/users/identify',
    auth: 'key',
    valid: () => ({
      aliases_to_identify: [{ external_id: 'fz-3', user_alias: { alias_name: 'n', alias_label: 'l' } }],
      emails_to_identify: [{ external_id: 'fz-3', email: 'c@example.com', prioritization: ['most_recently_updated'] }],
      merge_behavior: 'merge',
    }),
  },
  'POST /users/delete': {
    method: 'POST',
    path: () => '/users/delete',
    auth: 'key',
    valid: () => ({ external_ids: ['fz-9', 'fz-8'] }),
  },
  // subscriptions.ts
  'POST /subscription/status/set': {
    method: 'POST',
    path: () => '/subscription/status/set',
    auth: 'key',
    valid: () => ({ subscription_group_id: emailGroup, subscription_state: 'subscribed', external_id: ['fz-1'], email: ['ann@example.com'] }),
  },
  'POST /v2/subscription/status/set': {
    method: 'POST',
    path: () => '/v2/subscription/status/set',
    auth: 'key',
    valid: () => ({
      subscription_groups: [
        { subscription_group_id: smsGroup, subscription_state: 'unsubscribed', external_ids: ['fz-1'], phones: ['+14155552671'] },
        { subscription_group_id: emailGroup, subscription_state: 'subscribed', emails: ['ann@example.com'] },
      ],
    }),
  },
  // email.ts
  'POST /email/status': { method: 'POST', path: () => '/email/status', auth: 'key', valid: () => ({ email: 'ann@example.com', subscription_state: 'opted_in' }) },
  'POST /email/spam/remove': { method: 'POST', path: () => '/email/spam/remove', auth: 'key', valid: () => ({ email: ['spam@example.com', 'x@example.com'] }) },
  'POST /email/bounce/remove': { method: 'POST', path: () => '/email/bounce/remove', auth: 'key', valid: () => ({ email: 'bounce@example.com' }) },
  // users-export.ts
  'POST /users/export/segment': {
    method: 'POST',
    path: () => '/users/export/segment',
    auth: 'key',
    valid: () => ({ segment_id: segmentId, callback_endpoint: 'https://example.com/cb', fields_to_export: ['external_id', 'email'], custom_attributes_to_export: ['counter'], output_format: 'gzip' }),
  },
  'POST /users/export/global_control_group': {
    method: 'POST',
    path: () => '/users/export/global_control_group',
    auth: 'key',
    valid: () => ({ fields_to_export: ['external_id'], output_format: 'zip' }),
  },
  // admin.ts
  'POST /admin/v1/workspaces': { method: 'POST', path: () => '/admin/v1/workspaces', auth: 'admin', valid: () => ({ name: 'fuzz workspace' }) },
  'POST /admin/v1/workspaces/:ws/api_keys': {
    method: 'POST',
    path: () => `/admin/v1/workspaces/${scratch.id}/api_keys`,
    auth: 'admin',
    valid: () => ({ name: 'k', permissions: ['users.track', 'users.export.ids'] }),
  },
  'POST /admin/v1/scim_tokens': { method: 'POST', path: () => '/admin/v1/scim_tokens', auth: 'admin', valid: () => ({ request_origin: 'idp.example.com' }) },
  'POST /admin/v1/workspaces/:ws/subscription_groups': {
    method: 'POST',
    path: () => `/admin/v1/workspaces/${scratch.id}/subscription_groups`,
    auth: 'admin',
    valid: () => ({ name: 'newsletter', channel: 'email' }),
  },
  'POST /admin/v1/workspaces/:ws/segments': {
    method: 'POST',
    path: () => `/admin/v1/workspaces/${scratch.id}/segments`,
    auth: 'admin',
    valid: () => ({
      name: 'fuzz segment',
      filter: {
        all: [
          { field: 'country', op: 'eq', value: 'US' },
          { any: [{ custom_attribute: 'counter', op: 'gte', value: 3 }, { custom_event: 'opened', op: 'count_gte', value: 1, within_days: 30 }] },
          { not: { random_bucket: { gte: 0, lt: 500 } } },
          { subscription_group: 'g', state: 'subscribed' },
        ],
      },
    }),
  },
  'PUT /admin/v1/workspaces/:ws/global_control_group': {
    method: 'PUT',
    path: () => `/admin/v1/workspaces/${scratch.id}/global_control_group`,
    auth: 'admin',
    valid: () => ({ percent: 12.5 }),
  },
  'PUT /admin/v1/workspaces/:ws/export_storage': {
    method: 'PUT',
    path: () => `/admin/v1/workspaces/${scratch.id}/export_storage`,
    auth: 'admin',
    valid: () => ({ bucket: 'my-bucket', region: 'us-east-1', endpoint: 'http://127.0.0.1:9000', force_path_style: true, access_key_id: 'AK', secret_access_key: 'SK' }),
  },
  'PUT /admin/v1/workspaces/:ws/rate_limits': {
    method: 'PUT',
    path: () => `/admin/v1/workspaces/${scratch.id}/rate_limits`,
    auth: 'admin',
    valid: () => ({ default_per_hour: 1000, endpoints: { '/users/track': { limit: 10, window_seconds: 1 } } }),
  },
  'PUT /admin/v1/workspaces/:ws/blocked_external_ids': {
    method: 'PUT',
    path: () => `/admin/v1/workspaces/${scratch.id}/blocked_external_ids`,
    auth: 'admin',
    valid: () => ({ external_ids: ['blocked-1', 'blocked-2'] }),
  },
  // admin-email-lists.ts
  'POST /admin/v1/workspaces/:ws/email_spam_list': {
    method: 'POST',
    path: () => `/admin/v1/workspaces/${scratch.id}/email_spam_list`,
    auth: 'admin',
    valid: () => ({ emails: ['spam@example.com'] }),
  },
  'POST /admin/v1/workspaces/:ws/email_bounce_list': {
    method: 'POST',
    path: () => `/admin/v1/workspaces/${scratch.id}/email_bounce_list`,
    auth: 'admin',
    valid: () => ({ emails: ['bounce@example.com'] }),
  },
  // scim-users.ts
  // A new userName each time, so that valid bodies reach the create and not the 409.
  'POST /scim/v2/Users': { method: 'POST', path: () => '/scim/v2/Users', auth: 'scim', valid: () => scimUser(`new.user.${++scimUsers}@example.com`) },
  'PUT /scim/v2/Users/:id': { method: 'PUT', path: () => `/scim/v2/Users/${scimUserId}`, auth: 'scim', valid: () => scimUser('fuzz.user@example.com') },
  'PATCH /scim/v2/Users/:id': {
    method: 'PATCH',
    path: () => `/scim/v2/Users/${scimUserId}`,
    auth: 'scim',
    valid: () => ({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [
        { op: 'Replace', path: 'name.givenName', value: 'Fuzzy' },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'fuzz.user@example.com' },
        { op: 'replace', value: { active: 'False', displayName: 'Fuzz' } },
      ],
    }),
  },
  'POST /scim/v2/Users/.search': {
    method: 'POST',
    path: () => '/scim/v2/Users/.search',
    auth: 'scim',
    valid: () => ({ schemas: ['urn:ietf:params:scim:api:messages:2.0:SearchRequest'], filter: 'emails[type eq "work"] and active eq false', attributes: ['userName'], count: 10 }),
  },
}

function scimUser(userName: string) {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
    userName,
    name: { givenName: 'Fuzz', familyName: 'User' },
    department: 'engineering',
    permissions: {
      companyPermissions: ['add_company_users'],
      appGroup: [{ appGroupName: ws.name, appGroupPermissions: ['basic_access'], team: [{ teamName: 'core', teamPermissions: ['view_pii'] }], appGroupPermissionSets: [{ appGroupPermissionSetName: 'set' }] }],
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Bodies

/** A JSON token written as is (numbers JSON.stringify cannot write, deep nesting). */
class Raw {
  constructor(readonly text: string) {}
}

function toJson(v: unknown): string {
  if (v instanceof Raw) return v.text
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`).join(',')}}`
  }
  return JSON.stringify(v) ?? 'null'
}

const nestedArray = (d: number) => new Raw('['.repeat(d) + ']'.repeat(d))
const nestedObject = (d: number) => new Raw('{"a":'.repeat(d) + '1' + '}'.repeat(d))
const nestedFilter = (d: number) => new Raw('{"not":'.repeat(d) + '{"field":"country","op":"exists"}' + '}'.repeat(d))

/** Text that does not compress (Postgres compresses long repetitive index keys, not this). */
function randomText(n: number, seed = 7): string {
  let x = seed
  let out = ''
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31
    out += 'abcdefghijklmnopqrstuvwxyz0123456789'[x % 36]
  }
  return out
}
const longEmail = `${randomText(4000)}@example.com`

/** Values that break assumptions: wrong types, edge numbers, huge and odd strings, deep nesting. */
const nasty: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    null, true, false, 0, 1, -1, 0.5, 1e308, -1e308, 5e-324, 2 ** 53 + 2, -(2 ** 63), [], {}, [null], [[]], [{}],
    'NaN', 'Infinity', '-Infinity', '-0', '1e308', '', ' ', '\u0000', 'a\u0000b', '\uD800', 'a\uDC00', '\uD83D\uDE00', '\uFFFF', '\u202E', 'İ', 'ß', '🙂',
    '\u0301', 'null', 'true', '{"a":1}', '[]', '__proto__', "' OR 1=1 --", '%s%n', '${x}', 'a@b', '@', '+', '+1', '2024-02-30T00:00:00Z',
    'http://127.0.0.1:1/', 'javascript:alert(1)', 'subscribed', 'external_id', '*',
  ),
  fc.constantFrom(new Raw('-0'), new Raw('1e400'), new Raw('-1e400'), new Raw('1e-400'), new Raw('123456789012345678901234567890'), new Raw('-0.0e0')),
  fc.constantFrom(256, 513, 2001, 10_001, 100_000, 1_000_000).map((n) => 'x'.repeat(n)),
  fc.constantFrom(300, 3000, 10_000).map((n) => randomText(n)),
  fc.constantFrom(longEmail, `${randomText(250)}@example.com`),
  fc.constantFrom(51, 76, 101, 1001).map((n) => Array.from({ length: n }, (_, i) => `v${i}`)),
  fc.constantFrom(64, 1000, 10_000).chain((d) => fc.constantFrom(nestedArray(d), nestedObject(d), nestedFilter(d))),
  fc.string({ maxLength: 5 }).map((x) => `${x}\u0000${x}`),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.jsonValue({ maxDepth: 3 }),
)

const oddKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', 'x'.repeat(300), '\u0000', 'a.b', '$where', 'inc', 'external_id'),
  fc.string({ maxLength: 10 }),
)

type Path = (string | number)[]

function pathsOf(v: unknown, at: Path = [], out: Path[] = []): Path[] {
  out.push(at)
  if (Array.isArray(v)) v.forEach((x, i) => pathsOf(x, [...at, i], out))
  else if (v !== null && typeof v === 'object' && !(v instanceof Raw)) for (const [k, x] of Object.entries(v)) pathsOf(x, [...at, k], out)
  return out
}

type Mutation = { op: 'replace' | 'delete' | 'addKey' | 'repeat' | 'wrap'; at: number; value: unknown; key: string }

/** Applies a mutation to a copy of the body, at the `at`-th of its paths. */
function mutate(body: unknown, m: Mutation): unknown {
  const root = { body: structuredClone(body) } as Record<string, unknown>
  const paths = pathsOf(root.body)
  const path = ['body', ...paths[m.at % paths.length]]
  const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], root)
  const last = path[path.length - 1]
  const current = parent[last]
  switch (m.op) {
    case 'replace':
      parent[last] = m.value
      break
    case 'delete':
      if (Array.isArray(parent)) parent.splice(Number(last), 1)
      else delete parent[last]
      break
    case 'addKey':
      if (current !== null && typeof current === 'object' && !Array.isArray(current)) Object.defineProperty(current, m.key, { value: m.value, enumerable: true, configurable: true, writable: true })
      else parent[last] = { [m.key]: m.value }
      break
    case 'repeat':
      parent[last] = Array.isArray(current) && current.length ? Array.from({ length: 80 }, () => current[0]) : [current, current]
      break
    case 'wrap':
      parent[last] = [current]
      break
  }
  return root.body
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom<Mutation['op']>('replace', 'replace', 'replace', 'delete', 'addKey', 'repeat', 'wrap'),
  at: fc.nat(),
  value: nasty,
  key: oddKey,
})

/** A valid body with one to three mutations, as JSON text. */
const mutatedBody = (ep: Endpoint) => fc.array(mutation, { minLength: 1, maxLength: 3 }).map((ms) => toJson(ms.reduce(mutate, ep.valid())))
const anyJson = fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null')

/** Raw bodies with content types: malformed JSON, wrong types, empty bodies. */
const rawCases: { text?: string; contentType?: string }[] = [
  { text: '', contentType: 'application/json' },
  { text: undefined, contentType: undefined },
  { text: '{', contentType: 'application/json' },
  { text: '{"a":', contentType: 'application/json' },
  { text: '{"a":1,}', contentType: 'application/json' },
  { text: "{'a':1}", contentType: 'application/json' },
  { text: 'NaN', contentType: 'application/json' },
  { text: 'null', contentType: 'application/json' },
  { text: '"text"', contentType: 'application/json' },
  { text: '1e400', contentType: 'application/json' },
  { text: '[]', contentType: 'application/json' },
  { text: '\u0000', contentType: 'application/json' },
  { text: '\uFEFF{}', contentType: 'application/json' },
  { text: '{"a":"\\ud800"}', contentType: 'application/json' },
  { text: '{"a":"\\u0000"}', contentType: 'application/json' },
  { text: '{"__proto__":{"admin":true}}', contentType: 'application/json' },
  { text: '{"a":1}', contentType: 'text/plain' },
  { text: 'a=1&b=2', contentType: 'application/x-www-form-urlencoded' },
  { text: '<a/>', contentType: 'application/xml' },
  { text: '{"a":1}', contentType: 'application/json; charset=latin1' },
  { text: '{"a":1}', contentType: 'application/json; charset=utf-16' },
  { text: '{"a":1}', contentType: 'multipart/form-data; boundary=x' },
  { text: '{"a":1}', contentType: '' },
  { text: '{"a":1}', contentType: 'application/jsonx' },
  { text: '{"a":1}', contentType: undefined },
  { text: `{"a":"${'x'.repeat(5 * 1024 * 1024)}"}`, contentType: 'application/json' },
  { text: '['.repeat(100_000) + ']'.repeat(100_000), contentType: 'application/json' },
]
const rawBody = fc.oneof(
  fc.constantFrom(...rawCases),
  fc.string({ unit: 'binary', maxLength: 60 }).map((text) => ({ text, contentType: 'application/json' })),
  fc.jsonValue().map((v) => ({ text: JSON.stringify(v)!.slice(0, -1), contentType: 'application/json' })),
)

// ---------------------------------------------------------------------------------------------
// The property

function headersFor(auth: Auth): { token: string; headers: Record<string, string> } {
  if (auth === 'admin') return { token: env.adminToken, headers: {} }
  if (auth === 'scim') return { token: scimToken, headers: { 'x-request-origin': ORIGIN } }
  return { token: ws.key, headers: {} }
}

async function send(ep: Endpoint, text: string | undefined, contentType: string | undefined): Promise<HttpResult> {
  const { token, headers } = headersFor(ep.auth)
  return request(env.baseUrl, ep.method, ep.path(), { token, raw: text, headers: { ...headers, ...(contentType !== undefined && { 'content-type': contentType }) } })
}

/**
 * What a refused request must leave alone: no row of any table written (a row trigger on every
 * table logs each insert, update and delete into `fuzz_writes`, in the writing transaction), no
 * row count changed, and no job queued.
 */
async function snapshot() {
  const r = await env.ctx.pg.query(`SELECT ${tables.map((t) => `(SELECT count(*)::int FROM ${t}) AS ${t}`).join(', ')}, (SELECT count(*)::int FROM fuzz_writes) AS writes`)
  const names = env.ctx.queues.allNames()
  const counts = await Promise.all(names.map((n) => env.ctx.queues.get(n).getJobCountByTypes('waiting', 'delayed', 'prioritized', 'active')))
  return { rows: r.rows[0] as Record<string, number>, queues: Object.fromEntries(names.map((n, i) => [n, counts[i]])) }
}

/** The writes logged since `count`, to name them in a failure. */
async function writesSince(count: number) {
  return (await env.ctx.pg.query('SELECT tbl, op FROM fuzz_writes ORDER BY id OFFSET $1', [count])).rows
}

/**
 * The state after the last refused request, still current when nothing was accepted since (the
 * checks run one at a time and no worker runs): the next check starts from it instead of reading
 * it again.
 */
let known: Awaited<ReturnType<typeof snapshot>> | undefined

const shown = (text: string | undefined) => (text === undefined ? '(no body)' : text.length > 400 ? `${text.slice(0, 400)}... (${text.length} chars)` : text)

/** Sends one body and checks the answer; returns the status. */
async function checkOne(ep: Endpoint, name: string, text: string | undefined, contentType: string | undefined = 'application/json'): Promise<number> {
  const before = known ?? (await snapshot())
  known = undefined
  const r = await send(ep, text, contentType)
  const what = `${name} answered ${r.status} ${r.text.slice(0, 300)} to ${contentType ?? '(no content type)'} body ${shown(text)}`
  expect(r.status, what).toBeLessThan(500)
  if (r.status >= 400) {
    expect(r.headers.get('content-type'), what).toMatch(ep.auth === 'scim' ? /^application\/(scim\+)?json/ : /^application\/json/)
    if (ep.auth === 'scim') {
      expect(r.body?.schemas, what).toEqual([SCIM_ERROR])
      expect(r.body?.detail, what).toEqual(expect.any(String))
    } else {
      expect(r.body?.message, what).toEqual(expect.any(String))
      expect(r.body.message.length, what).toBeGreaterThan(0)
    }
    const after = await snapshot()
    if (after.rows.writes !== before.rows.writes) expect(await writesSince(before.rows.writes), `a refused request wrote rows: ${what}`).toEqual([])
    expect(after, `a refused request changed something: ${what}`).toEqual(before)
    known = after
  } else {
    expect(r.body, what).toBeTypeOf('object')
  }
  return r.status
}

/** FUZZ_SURVEY=1 lists every failing input instead of stopping (and shrinking) at the first. */
const SURVEY = process.env.FUZZ_SURVEY === '1'
const surveyed: string[] = []

async function fuzz(name: string, ep: Endpoint) {
  const statuses = new Map<number, number>()
  const tally = (s: number) => statuses.set(s, (statuses.get(s) ?? 0) + 1)
  const check = async (...args: Parameters<typeof checkOne>) => {
    if (!SURVEY) return checkOne(...args)
    try {
      return await checkOne(...args)
    } catch (e) {
      surveyed.push((e as Error).message.slice(0, 1500))
      return 0
    }
  }
  // The valid body is accepted (or refused only for what it names, never for its shape).
  tally(await check(ep, name, toJson(ep.valid())))
  await fc.assert(
    fc.asyncProperty(anyJson, async (text) => {
      tally(await check(ep, name, text))
    }),
    { numRuns: RUNS },
  )
  await fc.assert(
    fc.asyncProperty(mutatedBody(ep), async (text) => {
      tally(await check(ep, name, text))
    }),
    { numRuns: RUNS * 2 },
  )
  await fc.assert(
    fc.asyncProperty(rawBody, async ({ text, contentType }) => {
      tally(await check(ep, name, text, contentType))
    }),
    { numRuns: RUNS / 2 },
  )
  // Some inputs must have been accepted and some refused, or the fuzzing proved little.
  const accepted = [...statuses].filter(([s]) => s < 300).reduce((a, [, n]) => a + n, 0)
  const refused = [...statuses].filter(([s]) => s >= 400).reduce((a, [, n]) => a + n, 0)
  expect(refused, `${name}: ${JSON.stringify(Object.fromEntries(statuses))}`).toBeGreaterThan(RUNS)
  return { accepted, refused, statuses }
}

beforeAll(async () => {
  env = await startTestEnv()
  const main = await env.workspace()
  const name = (await env.ctx.pg.query<{ name: string }>('SELECT name FROM workspaces WHERE id = $1', [main.id])).rows[0].name
  ws = { ...main, name }
  scratch = await env.workspace()
  const limits = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, {
    default_per_hour: 1e9,
    endpoints: Object.fromEntries(['/users/track', '/users/merge', '/subscription/status/set', '/users/export/ids'].map((p) => [p, { limit: 1e9, window_seconds: 1 }])),
  })
  expect(limits.status, limits.text).toBe(200)
  const group = async (channel: string) => {
    const r = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: `g-${channel}`, channel })
    expect(r.status, r.text).toBe(201)
    return r.body.subscription_group_id as string
  }
  emailGroup = await group('email')
  smsGroup = await group('sms')
  const seg = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'everyone', filter: { field: 'external_id', op: 'exists' } })
  expect(seg.status, seg.text).toBe(201)
  segmentId = seg.body.segment_id
  const token = await env.admin('POST', '/admin/v1/scim_tokens', { request_origin: ORIGIN })
  expect(token.status, token.text).toBe(201)
  scimToken = token.body.token
  const user = await send(endpoints['POST /scim/v2/Users'], JSON.stringify(scimUser('fuzz.user@example.com')), 'application/scim+json')
  expect(user.status, user.text).toBe(201)
  scimUserId = user.body.id
  tables = (
    await env.ctx.pg.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE '%migration%' ORDER BY 1`,
    )
  ).rows.map((r) => r.table_name)
  expect(tables).toEqual(expect.arrayContaining(['profiles', 'segments', 'workspaces', 'dashboard_users', 'address_subscriptions', 'exports']))
  // This test's own database: log every row written, by table, in the writing transaction.
  await env.ctx.pg.query(`
    CREATE TABLE fuzz_writes (id bigserial PRIMARY KEY, tbl text NOT NULL, op text NOT NULL);
    CREATE FUNCTION fuzz_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO fuzz_writes (tbl, op) VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $$;
    ${tables.map((t) => `CREATE TRIGGER fuzz_log_write AFTER INSERT OR UPDATE OR DELETE ON ${t} FOR EACH ROW EXECUTE FUNCTION fuzz_log_write();`).join('\n')}
  `)
})
afterAll(async () => {
  if (SURVEY) console.log(`fuzz survey: ${surveyed.length} failures\n${surveyed.join('\n----\n')}`)
  await env?.close()
  // A survey that found failing inputs fails the file, which shows the list printed above.
  if (SURVEY) expect(surveyed.length, 'failing inputs, listed above').toBe(0)
})

describe('fuzzed request bodies: never a 5xx, every refusal a JSON message, a refusal changes nothing', () => {
  it('sees what an accepted request changes (the detector itself works)', async () => {
    const s0 = await snapshot()
    expect((await env.admin('POST', '/admin/v1/workspaces', { name: 'detector' })).status).toBe(201)
    const s1 = await snapshot()
    expect(s1.rows.workspaces).toBe(s0.rows.workspaces + 1)
    expect(s1.rows.writes).toBeGreaterThan(s0.rows.writes)
    // An update changes no count, but is logged.
    expect((await env.admin('PUT', `/admin/v1/workspaces/${scratch.id}/global_control_group`, { percent: 3 })).status).toBe(200)
    const s2 = await snapshot()
    expect(s2.rows.writes).toBe(s1.rows.writes + 1)
    const tracked = await env.call('POST', '/users/track', { key: ws.key, body: endpoints['POST /users/track'].valid() })
    expect(tracked.status, tracked.text).toBe(201)
    expect((await snapshot()).queues).not.toEqual(s2.queues)
    known = undefined
  })

  for (const [name, ep] of Object.entries(endpoints)) {
    it(name, async () => {
      const { accepted, refused, statuses } = await fuzz(name, ep)
      console.log(`fuzz ${name}: ${accepted} accepted, ${refused} refused ${JSON.stringify(Object.fromEntries(statuses))}`)
    }, 60_000)
  }
})

describe('inputs fuzzing once found to break a route (kept as regressions)', () => {
  const nulUser = (patch: (u: ReturnType<typeof scimUser>) => void, userName = 'nul.user@example.com') => {
    const u = scimUser(userName)
    patch(u)
    return JSON.stringify(u)
  }

  it('POST /scim/v2/Users with a NUL in name.givenName answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    await checkOne(endpoints['POST /scim/v2/Users'], 'POST /scim/v2/Users', nulUser((u) => (u.name.givenName = 'a\u0000b')))
  })

  it('POST /scim/v2/Users with a NUL in permissions.appGroup.0.appGroupName answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    await checkOne(endpoints['POST /scim/v2/Users'], 'POST /scim/v2/Users', nulUser((u) => (u.permissions.appGroup[0].appGroupName = 'a\u0000b')))
  })

  it('POST /scim/v2/Users with an unpaired surrogate in an appGroupPermissionSetName answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    const text = nulUser((u) => (u.permissions.appGroup[0].appGroupPermissionSets[0].appGroupPermissionSetName = '\uD800'))
    expect(hasLoneSurrogate(text)).toBe(true)
    await checkOne(endpoints['POST /scim/v2/Users'], 'POST /scim/v2/Users', text)
  })

  it('PUT /scim/v2/Users/:id with a NUL in name.familyName answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    await checkOne(endpoints['PUT /scim/v2/Users/:id'], 'PUT /scim/v2/Users/:id', nulUser((u) => (u.name.familyName = '\u0000'), 'fuzz.user@example.com'))
  })

  it('POST /scim/v2/Users with a deeply nested array in permissions.companyPermissions answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    const text = nulUser(() => {}).replace('"companyPermissions":["add_company_users"]', `"companyPermissions":[${'['.repeat(10_000)}${']'.repeat(10_000)}]`)
    expect(jsonDepth(text)).toBeGreaterThan(10_000)
    await checkOne(endpoints['POST /scim/v2/Users'], 'POST /scim/v2/Users', text)
  })

  it('PUT /scim/v2/Users/:id with a deeply nested array in permissions.appGroup.0.appGroupPermissions answers a SCIM 400, not a 500 (scim-users.ts)', async () => {
    const text = nulUser(() => {}, 'fuzz.user@example.com').replace('"appGroupPermissions":["basic_access"]', `"appGroupPermissions":[${'['.repeat(10_000)}${']'.repeat(10_000)}]`)
    expect(jsonDepth(text)).toBeGreaterThan(10_000)
    await checkOne(endpoints['PUT /scim/v2/Users/:id'], 'PUT /scim/v2/Users/:id', text)
  })

  it('POST /scim/v2/Users refused with 409 for a taken userName creates none of the teams it names (scim-users.ts)', async () => {
    const taken = nulUser(() => {}, 'fuzz.user@example.com').replace('"teamName":"core"', '"teamName":"a team nobody made"')
    expect(await checkOne(endpoints['POST /scim/v2/Users'], 'POST /scim/v2/Users', taken)).toBe(409)
  })

  it('POST /admin/v1/workspaces/:ws/email_spam_list refuses an email address of 4000 characters with a 400, not a 500 (EmailAddress in shared/domain/email.ts, used by admin-email-lists.ts)', async () => {
    await checkOne(endpoints['POST /admin/v1/workspaces/:ws/email_spam_list'], 'POST email_spam_list', JSON.stringify({ emails: [longEmail] }))
  })

  for (const [name, body] of [
    ['POST /email/status', { email: longEmail, subscription_state: 'subscribed' }],
    ['POST /subscription/status/set', { subscription_group_id: '', subscription_state: 'subscribed', email: [longEmail] }],
  ] as const) {
    it(`${name} refuses an email address of 4000 characters with a 400 instead of accepting it for the track job to fail on (EmailAddress in shared/domain/email.ts)`, async () => {
      const b = structuredClone(body) as Record<string, unknown>
      if ('subscription_group_id' in b) b.subscription_group_id = emailGroup
      const status = await checkOne(endpoints[name], name, JSON.stringify(b))
      expect(status).toBe(400)
    })
  }

  it('POST /users/merge refuses a NUL in an identifier with a 400 instead of accepting it for the identity job to fail on (users-identity.ts)', async () => {
    for (const identifier of [{ external_id: 'a\u0000' }, { user_alias: { alias_name: 'a\u0000', alias_label: 'l' } }, { email: 'a\u0000@example.com', prioritization: ['identified'] }]) {
      const text = JSON.stringify({ merge_updates: [{ identifier_to_merge: identifier, identifier_to_keep: { external_id: 'keep' } }] })
      const status = await checkOne(endpoints['POST /users/merge'], 'POST /users/merge', text)
      expect(status, text).toBe(400)
    }
  })
})
