import { FilterableFields, type Filter } from './segment-filter.js'

type FilterableField = (typeof FilterableFields)[number]

/**
 * The column of `profile_snapshots` holding a standard field's value as the record has it, as JSON
 * text (`null` when unset). A rule on a standard field reads those few bytes instead of parsing the
 * whole record for every member. The JSON functions applied to it are the ones applied to the
 * record, so the answers are the same.
 */
export const fieldColumn = (name: FilterableField) => `field_${name}`

/** Every standard-field column, in FilterableFields order. */
export const FieldColumns: readonly string[] = FilterableFields.map(fieldColumn)

/** A standard field's column value for a record: its JSON text, `null` when unset. */
export function fieldColumnValue(record: Record<string, unknown>, name: FilterableField): string {
  const value = record[name]
  return value === undefined || value === null ? 'null' : JSON.stringify(value)
}

/** What the column holds for rows written before it existed, worked out from their record. */
export const fieldColumnDefault = (name: FilterableField) => `if(JSONHas(record, '${name}'), JSONExtractRaw(record, '${name}'), 'null')`

/**
 * Compiles a segment filter (operator.md section 3) to a ClickHouse boolean expression over one
 * row of `profile_snapshots FINAL` (columns `record`, the field columns, `random_bucket`,
 * `profile_id`). Every value is a bound parameter; only fixed field names and operators are
 * written into the SQL. The expression expects the caller to bind `{ws:String}` (the workspace)
 * and `{after:UInt64}` (the keyset cursor: event subqueries skip profiles the outer query skips
 * anyway).
 *
 * Every piece yields 0 or 1, never NULL, so `not` and `neq` are plain negations: a user without
 * the attribute matches `neq` and `not_exists`.
 */
export interface CompiledFilter {
  where: string
  params: Record<string, unknown>
}

/** Fully qualified tables the event rules read, e.g. `db.events` and `db.profile_overrides`. */
export interface HistoryTables {
  eventsTable: string
  overridesTable: string
}

/**
 * The events of workspace `{ws:String}` joined to the merge overrides not yet squashed into them
 * (docs/identity.md): a merged profile's rows read as the profile it was merged into from the
 * moment the merge is done. Columns are `e.*`; EVENT_OWNER is the owning profile. Rows are to be
 * counted once per event id: a row the sweep has copied but not yet deleted, or one a retried
 * insert wrote twice, has the same id (this replaces FINAL, which would not see the first case).
 *
 * Every subquery here is GLOBAL: on a cluster (docs/clickhouse.md) it runs once and its rows go to
 * every shard, since an owner and the profiles merged into it may live on different shards (a plain
 * IN over a Distributed table is refused there, and made local it would miss them). On one server
 * GLOBAL plans exactly as the plain form does, so this is the SQL everywhere.
 */
export function ownedEvents(t: HistoryTables): string {
  return `${t.eventsTable} AS e GLOBAL LEFT ANY JOIN (SELECT old_profile_id, new_profile_id FROM ${t.overridesTable} FINAL WHERE workspace_id = {ws:String}) AS o
    ON e.profile_id = o.old_profile_id`
}

/** The profile owning a row of `ownedEvents` (an unmatched join leaves `o` empty or NULL, never equal). */
export const EVENT_OWNER = 'if(o.old_profile_id = e.profile_id, o.new_profile_id, e.profile_id)'


type Scalar = string | number | boolean

/** A JSON value to test: a document expression plus an optional path into it. */
interface JsonSource {
  doc: string
  path: string
  /**
   * The document is one value's JSON text exactly as JSON.stringify wrote it (a standard-field
   * column: fieldColumnValue, or fieldColumnDefault's extract of such a record, which the engine
   * writes back the same way): a string without escapes is its characters between quotes.
   */
  stringified?: boolean
}

const COUNT_OPERATORS = { count_eq: '=', count_gt: '>', count_gte: '>=', count_lt: '<', count_lte: '<=' } as const
/** Whether a user with no occurrence at all satisfies `count <op> n`. */
const ZERO_MATCHES: Record<keyof typeof COUNT_OPERATORS, (n: number) => boolean> = {
  count_eq: (n) => n === 0,
  count_gt: () => false,
  count_gte: (n) => n === 0,
  count_lt: (n) => n > 0,
  count_lte: () => true,
}
const ORDERING = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const
const NUMERIC_TYPES = `('Int64', 'UInt64', 'Double')`
/** An ISO 8601 date or timestamp: such values compare as instants, not as text. */
const DATE_LIKE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/

class ParamBinder {
  readonly values: Record<string, unknown> = {}
  private next = 0

  bind(value: unknown, type: string): string {
    const name = `f${this.next++}`
    this.values[name] = value
    return `{${name}:${type}}`
  }
}

const call = (fn: string, s: JsonSource) => `${fn}(${s.doc}${s.path ? `, ${s.path}` : ''})`
const typeIs = (s: JsonSource, type: string) => `${call('JSONType', s)} = '${type}'`
const isNumber = (s: JsonSource) => `${call('JSONType', s)} IN ${NUMERIC_TYPES}`
const asTime = (expr: string) => `parseDateTime64BestEffortOrNull(${expr}, 3, 'UTC')`
const anyOf = (parts: string[]) => (parts.length ? `(${parts.join(' OR ')})` : '0')
const allOf = (parts: string[]) => (parts.length ? `(${parts.join(' AND ')})` : '1')
const not = (expr: string) => `(NOT ${expr})`

/** Array elements of the source, for `arrayExists(x -> ..., elements)`. */
const ELEMENT: JsonSource = { doc: 'x', path: '' }
const elementsOf = (s: JsonSource) => call('JSONExtractArrayRaw', s)
const someElement = (s: JsonSource, test: (x: JsonSource) => string) =>
  `(${typeIs(s, 'Array')} AND arrayExists(x -> ${test(ELEMENT)}, ${elementsOf(s)}))`

function compare(s: JsonSource, operator: string, value: Scalar, p: ParamBinder): string {
  if (typeof value === 'string' && DATE_LIKE.test(value)) {
    return `(${typeIs(s, 'String')} AND ifNull(${asTime(call('JSONExtractString', s))} ${operator} ${asTime(p.bind(value, 'String'))}, 0))`
  }
  if (typeof value === 'string') {
    const exact = `(${typeIs(s, 'String')} AND ${call('JSONExtractString', s)} ${operator} ${p.bind(value, 'String')})`
    const text = JSON.stringify(value)
    // Parsing every row's JSON was half of a count's time. A row without a backslash holds the
    // value iff its text is the value's text; only a row with escapes is parsed.
    if (operator !== '=' || !s.stringified || text.includes('\\')) return exact
    return `(${s.doc} = ${p.bind(text, 'String')} OR (position(${s.doc}, char(92)) > 0 AND ${exact}))`
  }
  if (typeof value === 'number') return `(${isNumber(s)} AND ${call('JSONExtractFloat', s)} ${operator} ${p.bind(value, 'Float64')})`
  if (operator !== '=') return '0'
  return `(${typeIs(s, 'Bool')} AND ${call('JSONExtractBool', s)} = ${p.bind(value ? 1 : 0, 'UInt8')})`
}

/** The value is one of `values`: strings, numbers and booleans each tested as one bound array. */
function oneOf(s: JsonSource, values: Scalar[], p: ParamBinder): string {
  const strings = values.filter((v): v is string => typeof v === 'string')
  const numbers = values.filter((v): v is number => typeof v === 'number')
  const booleans = values.filter((v): v is boolean => typeof v === 'boolean').map((b) => (b ? 1 : 0))
  const parts: string[] = []
  if (strings.length) parts.push(`(${typeIs(s, 'String')} AND ${call('JSONExtractString', s)} IN ${p.bind(strings, 'Array(String)')})`)
  if (numbers.length) parts.push(`(${isNumber(s)} AND ${call('JSONExtractFloat', s)} IN ${p.bind(numbers, 'Array(Float64)')})`)
  if (booleans.length) parts.push(`(${typeIs(s, 'Bool')} AND ${call('JSONExtractBool', s)} IN ${p.bind(booleans, 'Array(UInt8)')})`)
  return anyOf(parts)
}

/**
 * A value rule on one JSON value. `contains` is a case-insensitive substring of a string value or
 * an element of an array value; `in` matches a listed value or an array holding one.
 */
function valueRule(s: JsonSource, op: string, value: unknown, p: ParamBinder): string {
  const exists = `${call('JSONType', s)} != 'Null'`
  switch (op) {
    case 'exists':
      return `(${exists})`
    case 'not_exists':
      return not(`(${exists})`)
    case 'eq':
      return compare(s, '=', value as Scalar, p)
    case 'neq':
      return not(compare(s, '=', value as Scalar, p))
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return compare(s, ORDERING[op], value as Scalar, p)
    case 'contains': {
      const inArray = someElement(s, (x) => compare(x, '=', value as Scalar, p))
      if (typeof value !== 'string') return inArray
      return anyOf([`(${typeIs(s, 'String')} AND positionCaseInsensitiveUTF8(${call('JSONExtractString', s)}, ${p.bind(value, 'String')}) > 0)`, inArray])
    }
    case 'in': {
      const values = value as Scalar[]
      return anyOf([oneOf(s, values, p), someElement(s, (x) => oneOf(x, values, p))])
    }
    default:
      throw new Error(`unknown operator ${op}`)
  }
}

const field = (name: FilterableField): JsonSource => ({ doc: fieldColumn(name), path: '', stringified: true })

/**
 * Occurrence counts per owning profile (merge overrides applied); a rule that zero satisfies is
 * written as "not among the users failing it". The keyset cursor skips owners the outer query
 * skips anyway, and rows of profiles merged into one of the owners left.
 */
function countRule(f: Extract<Filter, { custom_event: string } | { purchase: string }>, p: ParamBinder, t: HistoryTables): string {
  const [kind, name] = 'custom_event' in f ? (['event', f.custom_event] as const) : (['purchase', f.purchase] as const)
  const operator = COUNT_OPERATORS[f.op]
  const zeroMatches = ZERO_MATCHES[f.op](f.value)
  const mergedAfter = `SELECT old_profile_id FROM ${t.overridesTable} FINAL WHERE workspace_id = {ws:String} AND new_profile_id > {after:UInt64}`
  const conditions = ['e.workspace_id = {ws:String}', `(e.profile_id > {after:UInt64} OR e.profile_id GLOBAL IN (${mergedAfter}))`, `e.kind = '${kind}'`]
  if (!(kind === 'purchase' && name === '*')) conditions.push(`e.name = ${p.bind(name, 'String')}`)
  if (f.within_days !== undefined) conditions.push(`e.time >= now64(3) - toIntervalDay(${p.bind(f.within_days, 'UInt32')})`)
  const having = `uniqExact(e.event_id) ${operator} ${p.bind(f.value, 'UInt64')}`
  const subquery = `SELECT ${EVENT_OWNER} AS owner FROM ${ownedEvents(t)} WHERE ${conditions.join(' AND ')}
    GROUP BY owner HAVING owner > {after:UInt64} AND ${zeroMatches ? `NOT (${having})` : having}`
  return `(profile_id ${zeroMatches ? 'GLOBAL NOT IN' : 'GLOBAL IN'} (${subquery}))`
}

function compileNode(f: Filter, p: ParamBinder, t: HistoryTables): string {
  if ('all' in f) return allOf(f.all.map((x) => compileNode(x, p, t)))
  if ('any' in f) return anyOf(f.any.map((x) => compileNode(x, p, t)))
  if ('not' in f) return not(compileNode(f.not, p, t))
  if ('field' in f) return valueRule(field(f.field), f.op, f.value, p)
  if ('custom_attribute' in f) {
    return valueRule({ doc: 'record', path: `'custom_attributes', ${p.bind(f.custom_attribute, 'String')}` }, f.op, f.value, p)
  }
  if ('custom_event' in f || 'purchase' in f) return countRule(f, p, t)
  if ('random_bucket' in f) {
    const bounds: string[] = []
    if (f.random_bucket.gte !== undefined) bounds.push(`random_bucket >= ${p.bind(f.random_bucket.gte, 'UInt16')}`)
    if (f.random_bucket.lt !== undefined) bounds.push(`random_bucket < ${p.bind(f.random_bucket.lt, 'UInt16')}`)
    return allOf(bounds)
  }
  if ('email_subscribe' in f) return compare(field('email_subscribe'), '=', f.email_subscribe, p)
  if ('push_subscribe' in f) return compare(field('push_subscribe'), '=', f.push_subscribe, p)
  if ('subscription_group' in f) {
    const group = `JSONExtractString(x, 'subscription_group_id') = ${p.bind(f.subscription_group, 'String')}`
    const state = `JSONExtractString(x, 'subscription_state') = ${p.bind(f.state, 'String')}`
    return `arrayExists(x -> ${group} AND ${state}, JSONExtractArrayRaw(record, 'subscription_groups'))`
  }
  throw new Error(`unknown filter rule ${JSON.stringify(f)}`)
}

export function compileSegmentFilter(filter: Filter, tables: HistoryTables): CompiledFilter {
  const p = new ParamBinder()
  const where = compileNode(filter, p, tables)
  return { where, params: p.values }
}

/** The global control group: users whose random bucket is below `percent * 100`. */
export function globalControlGroupFilter(percent: number): Filter {
  return { random_bucket: { lt: Math.round(percent * 100) } }
}
