import { z } from 'zod'
import { inlineQueryParams } from '../clickhouse/literals.js'
import { Filter } from './segment-filter.js'
import { compileSegmentFilter } from './segment-sql.js'

/**
 * What a segment filter may hold, checked when the segment is created so that every stored filter
 * can be counted and exported (docs/exports.md "Filter limits"). The largest filter within them is
 * counted in a test (test/services/api/segment-limits.test.ts).
 */
export const SegmentFilterLimits = {
  /** Rules other than all, any and not. */
  conditions: 100,
  /** custom_event and purchase rules: each is a pass over the workspace's event history. */
  countRules: 20,
  /** all, any and not nested in one another. */
  depth: 10,
  /** The filter as JSON text, in UTF-8 bytes. */
  bytes: 32 * 1024,
  /**
   * The filter compiled to SQL, values written in. A count holds it twice, so this keeps every
   * count under ClickHouse's default max_query_size of 256 KiB; long `in` lists of short values
   * grow most (each value is written twice).
   */
  compiledBytes: 100 * 1024,
} as const

const L = SegmentFilterLimits
const n = (x: number) => x.toLocaleString('en')

interface Shape {
  conditions: number
  countRules: number
  depth: number
}

/** The rules and nesting of a filter as sent (any JSON value): what the schema would walk. */
function shapeOf(value: unknown): Shape {
  const shape: Shape = { conditions: 0, countRules: 0, depth: 0 }
  // Bounded recursion: a request body nests at most MAX_JSON_DEPTH (services/api/validation.ts).
  const walk = (v: unknown, depth: number) => {
    const node = v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
    const children = node && (Array.isArray(node.all) ? node.all : Array.isArray(node.any) ? node.any : 'not' in node ? [node.not] : undefined)
    if (children) {
      shape.depth = Math.max(shape.depth, depth + 1)
      for (const c of children) walk(c, depth + 1)
      return
    }
    shape.conditions++
    if (node && ('custom_event' in node || 'purchase' in node)) shape.countRules++
  }
  walk(value, 0)
  return shape
}

/** Why a filter as sent is over a limit of its size or shape, or undefined; cheap, before any schema. */
function sizeProblem(value: unknown): string | undefined {
  const shape = shapeOf(value)
  if (shape.conditions > L.conditions) return `has ${n(shape.conditions)} conditions; at most ${L.conditions} are allowed (a condition is any rule but all, any and not)`
  if (shape.countRules > L.countRules) return `has ${shape.countRules} custom_event and purchase conditions; at most ${L.countRules} are allowed`
  if (shape.depth > L.depth) return `nests all, any and not ${shape.depth} levels deep; at most ${L.depth} are allowed`
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? '')
  if (bytes > L.bytes) return `is ${n(bytes)} bytes of JSON; at most ${n(L.bytes)} are allowed`
  return undefined
}

/** Table names as long as any deployment's, so the measure is never short of the real query. */
const MEASURE_TABLES = { eventsTable: `${'d'.repeat(64)}.events`, overridesTable: `${'d'.repeat(64)}.profile_overrides` }
const MEASURE_BINDINGS = { ws: '00000000-0000-0000-0000-000000000000', after: '18446744073709551615' }

function compiledProblem(filter: Filter): string | undefined {
  const compiled = compileSegmentFilter(filter, MEASURE_TABLES)
  const bytes = Buffer.byteLength(inlineQueryParams(compiled.where, { ...compiled.params, ...MEASURE_BINDINGS }))
  if (bytes > L.compiledBytes) return `compiles to a query of ${n(bytes)} bytes; at most ${n(L.compiledBytes)} are allowed (use fewer conditions or shorter value lists)`
  return undefined
}

/** Why a filter (a stored one, or one that passed the schema) cannot be counted within the limits, or undefined. */
export function filterLimitProblem(filter: Filter): string | undefined {
  return sizeProblem(filter) ?? compiledProblem(filter)
}

/**
 * The filter of a segment being created: its size and shape first (a 50,000-rule filter is
 * refused before 50,000 rules are validated), then the language of operator.md section 3, then
 * the size of its query. Each refusal names the limit.
 */
export const BoundedFilter: z.ZodType<Filter> = z.unknown().transform((value, ctx) => {
  const refuse = (message: string, path: PropertyKey[] = []) => {
    ctx.addIssue({ code: 'custom', message, path })
    return z.NEVER
  }
  const tooLarge = sizeProblem(value)
  if (tooLarge) return refuse(tooLarge)
  const parsed = Filter.safeParse(value)
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path })
    return z.NEVER
  }
  const tooLong = compiledProblem(parsed.data)
  return tooLong ? refuse(tooLong) : parsed.data
}) as unknown as z.ZodType<Filter>
