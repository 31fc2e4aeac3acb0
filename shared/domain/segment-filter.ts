import { z } from 'zod'
import { FilteredProfileFields } from './profile-fields.js'

/** Standard record fields a segment may filter on (interface.md 2.4): every profile field among them. */
export const FilterableFields = [
  'created_at', 'external_id', 'service_id', 'random_bucket', ...FilteredProfileFields, 'total_revenue', 'attributed_campaign',
  'attributed_source', 'attributed_adgroup', 'attributed_ad', 'uninstalled_at',
] as const

export const ValueOps = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'exists', 'not_exists', 'contains', 'in'] as const
export const CountOps = ['count_eq', 'count_gt', 'count_gte', 'count_lt', 'count_lte'] as const

const ORDERING_OPS = new Set(['gt', 'gte', 'lt', 'lte'])

/** An enum whose error names the bad value and every accepted one. */
function namedEnum<const T extends readonly [string, ...string[]]>(values: T, what: string) {
  return z.enum(values, {
    error: (iss) => `unknown ${what} ${JSON.stringify(iss.input)}; expected one of ${values.join(', ')}`,
  })
}

const Scalar = z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, a number or a boolean' })
const FilterValue = z.union([Scalar, z.array(Scalar)], { error: 'must be a string, a number, a boolean or an array of them' })

function valueRule<T extends z.ZodRawShape>(shape: T) {
  return z
    .object({ ...shape, op: namedEnum(ValueOps, 'operator'), value: FilterValue.optional() })
    .strict()
    .superRefine((parsed, ctx) => {
      const f = parsed as { op: string; value?: unknown }
      const needsValue = f.op !== 'exists' && f.op !== 'not_exists'
      const problem = (message: string) => ctx.addIssue({ code: 'custom', path: ['value'], message })
      if (needsValue && f.value === undefined) return problem(`op ${f.op} needs a value`)
      if (f.op === 'in' && !Array.isArray(f.value)) problem('op in needs an array value')
      if (f.op !== 'in' && Array.isArray(f.value)) problem(`op ${f.op} needs a single value, not an array`)
      if (ORDERING_OPS.has(f.op) && typeof f.value === 'boolean') problem(`op ${f.op} needs a number or a string (a date), not a boolean`)
    })
}

const countRule = <T extends z.ZodRawShape>(shape: T) =>
  z
    .object({
      ...shape,
      op: namedEnum(CountOps, 'count operator'),
      value: z.number({ error: 'must be a whole number of occurrences' }).int('must be a whole number of occurrences').min(0),
      within_days: z.number().int('must be a whole number of days').min(1).max(3650).optional(),
    })
    .strict()

const SubscriptionState = namedEnum(['opted_in', 'subscribed', 'unsubscribed'], 'subscription state')
const Bucket = z.number().int('must be a whole number').min(0).max(10000)

export type Filter =
  | { all: Filter[] }
  | { any: Filter[] }
  | { not: Filter }
  | { field: (typeof FilterableFields)[number]; op: (typeof ValueOps)[number]; value?: unknown }
  | { custom_attribute: string; op: (typeof ValueOps)[number]; value?: unknown }
  | { custom_event: string; op: (typeof CountOps)[number]; value: number; within_days?: number }
  | { purchase: string; op: (typeof CountOps)[number]; value: number; within_days?: number }
  | { random_bucket: { gte?: number; lt?: number } }
  | { email_subscribe: string }
  | { push_subscribe: string }
  | { subscription_group: string; state: 'subscribed' | 'unsubscribed' }

/**
 * One schema per rule kind, picked by the key that names the kind, so a 400 names the actual
 * problem (an unknown operator, a missing value) instead of "no union member matched".
 */
const rules: Record<string, () => z.ZodType> = {
  all: () => z.object({ all: z.array(Filter, { error: 'must be an array of filters' }) }).strict(),
  any: () => z.object({ any: z.array(Filter, { error: 'must be an array of filters' }).min(1, 'needs at least one filter') }).strict(),
  not: () => z.object({ not: Filter }).strict(),
  field: () => valueRule({ field: namedEnum(FilterableFields, 'profile field') }),
  custom_attribute: () => valueRule({ custom_attribute: z.string().min(1, 'must name a custom attribute') }),
  custom_event: () => countRule({ custom_event: z.string().min(1, 'must name a custom event') }),
  purchase: () => countRule({ purchase: z.string().min(1, 'must name a product id or "*"') }),
  random_bucket: () => z.object({ random_bucket: z.object({ gte: Bucket.optional(), lt: Bucket.optional() }).strict() }).strict(),
  email_subscribe: () => z.object({ email_subscribe: SubscriptionState }).strict(),
  push_subscribe: () => z.object({ push_subscribe: SubscriptionState }).strict(),
  subscription_group: () =>
    z.object({ subscription_group: z.string().min(1), state: namedEnum(['subscribed', 'unsubscribed'], 'subscription group state') }).strict(),
}
const ruleKinds = Object.keys(rules)
const built = new Map<string, z.ZodType>()
const ruleSchema = (kind: string) => built.get(kind) ?? built.set(kind, rules[kind]()).get(kind)!

/** The segment filter language of operator.md section 3; a wrong shape is a 400 at creation. */
export const Filter: z.ZodType<Filter> = z.lazy(() =>
  z.unknown().superRefine((value, ctx) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return ctx.addIssue({ code: 'custom', message: `a filter must be an object with one of the keys ${ruleKinds.join(', ')}` })
    }
    const kind = ruleKinds.find((k) => k in value)
    if (!kind) {
      const keys = Object.keys(value).join(', ') || 'none'
      return ctx.addIssue({ code: 'custom', message: `unknown filter rule (keys: ${keys}); expected one of the keys ${ruleKinds.join(', ')}` })
    }
    const parsed = ruleSchema(kind).safeParse(value)
    if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path })
  }),
) as z.ZodType<Filter>
