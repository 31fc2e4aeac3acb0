import { z } from 'zod'
import { customAttributeProblem, isPlainObject } from './attributes.js'
import { countryOf } from './countries.js'
import { emailProblem, normalizeEmail } from './email.js'
import type { Identifier } from './identifiers.js'
import { toE164 } from './phone.js'
import { SettableFieldRules, type FieldRule, type ProfileFieldValue } from './profile-fields.js'
import { isStoredTime } from './track-operations.js'

/** A problem with one field of one object; the message names the field. */
export class FieldError extends Error {}

/**
 * A member of a track object, defined once: the check the request path runs (it normalizes the
 * value, or throws a FieldError naming the field; `undefined` is an absent member) and the schema
 * the OpenAPI document shows, written side by side from the same bounds and patterns.
 */
export interface Member<T> {
  parse(value: unknown, field: string): T
  doc: z.ZodType
}

export type Members = Record<string, Member<unknown>>
export type Checked<M extends Members> = { [K in keyof M]: M[K] extends Member<infer T> ? T : never }

/** Each member's name, check and field suffix, in the members' order. */
const checksOf = (members: Members) => Object.entries(members).map(([name, m]) => ({ name, parse: m.parse, suffix: `.${name}` }))

/** The checks of `members` in their order; answers their normalized values in that order. */
export function memberChecks<M extends Members>(members: M): (obj: Record<string, unknown>, at: string) => Checked<M> {
  const checks = checksOf(members)
  return (obj, at) => {
    const checked: Record<string, unknown> = {}
    for (const c of checks) checked[c.name] = c.parse(obj[c.name], at + c.suffix)
    return checked as Checked<M>
  }
}

/**
 * The parser of a track object from its definition: the members of `before`, the identifier
 * (`identify`), the members of `after`, checked in that order (the first problem found is the one
 * reported), answering `{index, identifier, ...members}` in that order.
 */
export function objectParser<B extends Members, A extends Members, I>(
  list: string,
  before: B,
  identify: (obj: Record<string, unknown>, at: string) => I,
  after: A,
): (raw: unknown, index: number) => { index: number; identifier: I } & Checked<B> & Checked<A> {
  const checksBefore = checksOf(before)
  const checksAfter = checksOf(after)
  return (raw, index) => {
    const at = `${list}[${index}]`
    if (!isPlainObject(raw)) throw new FieldError(`${at}: must be an object`)
    // The identifier holds its place after `index` from the start, though it is checked after `before`.
    const parsed: Record<string, unknown> = { index, identifier: undefined }
    for (const c of checksBefore) parsed[c.name] = c.parse(raw[c.name], at + c.suffix)
    parsed.identifier = identify(raw, at)
    for (const c of checksAfter) parsed[c.name] = c.parse(raw[c.name], at + c.suffix)
    return parsed as { index: number; identifier: I } & Checked<B> & Checked<A>
  }
}

/** The document's shape of `members`. */
export function docShape(members: Members): Record<string, z.ZodType> {
  return Object.fromEntries(Object.entries(members).map(([name, m]) => [name, m.doc]))
}

/** A string of `min` to `max` characters. */
export function text(min: number, max: number): Member<string> {
  return {
    parse(value, field) {
      if (typeof value !== 'string' || value.length < min || value.length > max) throw new FieldError(`${field}: must be a string of ${min} to ${max} characters`)
      return value
    },
    doc: z.string().min(min).max(max),
  }
}

export const optionalString: Member<string | undefined> = {
  parse(value, field) {
    if (value !== undefined && typeof value !== 'string') throw new FieldError(`${field}: must be a string`)
    return value
  },
  doc: z.string().optional(),
}

export const optionalBoolean: Member<boolean | undefined> = {
  parse(value, field) {
    if (value !== undefined && typeof value !== 'boolean') throw new FieldError(`${field}: must be a boolean`)
    return value
  },
  doc: z.boolean().optional(),
}

/** A list whose items a zod schema checks (rare and short lists: push tokens, subscription groups); absent is empty. */
export function listOf<S extends z.ZodType>(item: S): Member<z.infer<S>[]> {
  const list = z.array(item)
  return {
    parse(value, field) {
      if (value === undefined) return []
      const r = list.safeParse(value)
      if (!r.success) {
        const issue = r.error.issues[0]
        const where = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')
        throw new FieldError(`${field}${where}: ${issue.message}`)
      }
      return r.data
    },
    doc: list.optional(),
  }
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i

/** Two decimal digits at `i` as a number (the caller has checked they are digits). */
const twoDigits = (s: string, i: number) => (s.charCodeAt(i) - 48) * 10 + s.charCodeAt(i + 1) - 48
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

/**
 * Whether a time is already what parseTime answers: the form the API stores (`isStoredTime`,
 * `Date#toISOString`'s) holding a real calendar date and time of day. Most senders send exactly
 * that, and the general path's regex, parse and format were a quarter of the API's validation
 * under a mixed load. Anything else (Feb 30, 24:00, offsets, fewer digits) takes the general path.
 */
function isCanonicalTime(s: string): boolean {
  if (!isStoredTime(s)) return false
  const year = twoDigits(s, 0) * 100 + twoDigits(s, 2)
  const month = twoDigits(s, 5)
  const day = twoDigits(s, 8)
  if (month < 1 || month > 12 || day < 1) return false
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  return day <= DAYS_IN_MONTH[month - 1] + (month === 2 && leap ? 1 : 0) && twoDigits(s, 11) < 24 && twoDigits(s, 14) < 60 && twoDigits(s, 17) < 60
}

/** ISO 8601 with an offset or Z, normalized to UTC with milliseconds. */
export function parseTime(value: unknown, field: string): string {
  if (typeof value === 'string' && isCanonicalTime(value)) return value
  const ms = typeof value === 'string' && ISO_TIME.test(value) ? Date.parse(value) : NaN
  if (Number.isNaN(ms)) throw new FieldError(`${field}: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z`)
  return new Date(ms).toISOString()
}

export const timestamp: Member<string> = {
  parse: parseTime,
  doc: z.string().describe('ISO 8601 with an offset or Z, e.g. 2024-05-01T12:00:00Z'),
}

export function properties(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined) return {}
  if (!isPlainObject(value)) throw new FieldError(`${field}: must be an object`)
  return value
}

/**
 * An event's or a purchase's properties: any object; absent is empty. Kept as the object's JSON
 * text: the event history stores them as that text and nothing on the way reads into them, so the
 * worker neither builds the object again from its job nor writes its JSON again.
 */
export const propertiesMember: Member<string> = {
  parse: (value, field) => JSON.stringify(properties(value, field)),
  doc: z.record(z.string(), z.unknown()).optional(),
}

export function parseEmail(value: unknown, field: string): string {
  const problem = emailProblem(value)
  if (problem) throw new FieldError(`${field}: ${problem}`)
  return normalizeEmail(value as string)
}

export function parsePhone(value: unknown, field: string): string {
  const e164 = typeof value === 'string' ? toE164(value) : undefined
  if (!e164) throw new FieldError(`${field}: must be a valid phone number with country code (E.164)`)
  return e164
}

/** Bounded: an id is the key of index rows. */
const MAX_ID_LENGTH = 512

/** external_id and service_id: a non-empty string. */
const idString: Member<string> = {
  parse(value, field) {
    if (typeof value !== 'string' || value.length === 0) throw new FieldError(`${field}: must be a non-empty string`)
    if (value.length > MAX_ID_LENGTH) throw new FieldError(`${field}: must be at most ${MAX_ID_LENGTH} characters`)
    return value
  },
  doc: z.string().min(1).max(MAX_ID_LENGTH),
}

export const UserAlias = z.object({ alias_name: z.string().min(1).max(MAX_ID_LENGTH), alias_label: z.string().min(1).max(MAX_ID_LENGTH) }).strict()

const userAlias: Member<z.infer<typeof UserAlias>> = {
  parse(value, field) {
    const r = UserAlias.safeParse(value)
    if (!r.success) throw new FieldError(`${field}: must be an object with string alias_name and alias_label`)
    return r.data
  },
  doc: UserAlias,
}

/** How the document shows the members that may name the user (identifierOf picks one); email and phone are documented with each object. */
export const IdentifyingDocs = {
  external_id: idString.doc.optional(),
  user_alias: userAlias.doc.optional(),
  service_id: idString.doc.optional(),
  braze_id: idString.doc.optional().describe("service_id as the reference's senders spell it"),
}

/** `braze_id` is the reference's name of service_id, which its senders (a CDP's destination) send as it is. */
const PRIMARY_IDENTIFIERS = ['external_id', 'user_alias', 'service_id', 'braze_id'] as const

/**
 * The identifier of a track object: exactly one of external_id, user_alias, service_id (or
 * braze_id); or else email, then phone (which are also profile fields when another identifier is
 * present).
 */
export function identifierOf(obj: Record<string, unknown>, prefix: string): Identifier {
  // Counted before any list is built: this runs for every object of every request.
  const primaries =
    (obj.external_id !== undefined ? 1 : 0) + (obj.user_alias !== undefined ? 1 : 0) + (obj.service_id !== undefined ? 1 : 0) + (obj.braze_id !== undefined ? 1 : 0)
  if (primaries > 1) {
    const primary = PRIMARY_IDENTIFIERS.filter((k) => obj[k] !== undefined)
    throw new FieldError(`${prefix}: send exactly one of external_id, user_alias, service_id (got ${primary.join(', ')})`)
  }
  if (obj.external_id !== undefined) return { kind: 'external_id', value: idString.parse(obj.external_id, `${prefix}.external_id`) }
  if (obj.user_alias !== undefined) return { kind: 'user_alias', ...userAlias.parse(obj.user_alias, `${prefix}.user_alias`) }
  if (obj.service_id !== undefined) return { kind: 'service_id', value: idString.parse(obj.service_id, `${prefix}.service_id`) }
  if (obj.braze_id !== undefined) return { kind: 'service_id', value: idString.parse(obj.braze_id, `${prefix}.braze_id`) }
  if (obj.email !== undefined && obj.email !== null) return { kind: 'email', value: parseEmail(obj.email, `${prefix}.email`) }
  if (obj.phone !== undefined && obj.phone !== null) return { kind: 'phone', value: parsePhone(obj.phone, `${prefix}.phone`) }
  throw new FieldError(`${prefix}: one of external_id, user_alias, service_id, email or phone is required to identify the user`)
}

/**
 * Time zones found valid: finding out builds a formatter, which costs more than all other checks
 * of an object. Bounded, since a name may come in any case.
 */
const validZones = new Set<string>()

function validTimeZone(tz: string): boolean {
  if (validZones.has(tz)) return true
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz })
  } catch {
    return false
  }
  if (validZones.size < 1000) validZones.add(tz)
  return true
}

const DATE = /^\d{4}-\d{2}-\d{2}$/
const TWO_LETTERS = /^[A-Za-z]{2}$/

function parseDate(value: string, field: string): string {
  if (!DATE.test(value) || Number.isNaN(Date.parse(`${value}T00:00:00Z`))) throw new FieldError(`${field}: must be a date YYYY-MM-DD`)
  return value
}

const URL_MAX = 2048
const LONGITUDE = z.number().min(-180).max(180)
const LATITUDE = z.number().min(-90).max(90)
const Location = z.object({ longitude: LONGITUDE, latitude: LATITUDE }).strict()
const Count = z.number().int().min(0)
/** The reference's hashes of social profile data; the X (Twitter) id as a number or the string some senders make of it. */
const Social = {
  facebook: z.object({ id: z.string().max(255), likes: z.array(z.string().max(255)).max(1000), num_friends: Count }).partial().strict(),
  twitter: z
    .object({ id: z.union([z.number().int(), z.string().max(255)]), screen_name: z.string().max(255), followers_count: Count, friends_count: Count, statuses_count: Count })
    .partial()
    .strict(),
}

/** The first issue of a zod check of a field's value, as a FieldError naming the member. */
function zodProblem(field: string, issue: z.core.$ZodIssue): FieldError {
  const where = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')
  return new FieldError(`${field}${where}: ${issue.message}`)
}

/**
 * Each kind of FieldRule (profile-fields.ts): the JSON type its value is sent as (`input`, a string
 * unless told), how it is checked and normalized, what null stores (`cleared`, null unless told),
 * and how the document shows it (`note`: its description there).
 */
type RuleKind<R extends FieldRule> = {
  input?: 'boolean' | 'object'
  check(rule: R, value: never, field: string, nullable: boolean): ProfileFieldValue
  cleared?: ProfileFieldValue
  doc(rule: R): z.ZodType
  note?(rule: R): string
}
const RuleKinds: { [K in FieldRule['kind']]: RuleKind<Extract<FieldRule, { kind: K }>> } = {
  text: {
    check(_, value: string, field) {
      if (value.length > 10_000) throw new FieldError(`${field}: must be at most 10000 characters`)
      return value
    },
    doc: () => z.string().max(10_000),
  },
  email: {
    check: (_, value: string, field) => parseEmail(value, field),
    doc: () => z.string(),
    note: () => 'an email address of at most 254 characters; null clears it',
  },
  phone: {
    check: (_, value: string, field) => parsePhone(value, field),
    doc: () => z.string(),
    note: () => 'a phone number with its country code (E.164); null clears it',
  },
  date: {
    check: (_, value: string, field) => parseDate(value, field),
    doc: () => z.string().regex(DATE),
  },
  timeZone: {
    check(_, value: string, field) {
      if (!validTimeZone(value)) throw new FieldError(`${field}: must be an IANA time zone such as America/New_York. Not stored`)
      return value
    },
    doc: () => z.string(),
    note: () => 'an IANA time zone such as America/New_York',
  },
  code: {
    check(rule, value: string, field) {
      if (!TWO_LETTERS.test(value)) throw new FieldError(`${field}: must be an ${rule.standard} code`)
      return rule.letterCase === 'upper' ? value.toUpperCase() : value.toLowerCase()
    },
    doc: () => z.string().regex(TWO_LETTERS),
    note: (rule) => rule.standard,
  },
  oneOf: {
    check(rule, value: string, field, nullable) {
      const v = rule.upperCase ? value.toUpperCase() : value
      if (!rule.values.includes(v)) throw new FieldError(`${field}: must be one of ${rule.values.join(', ')}${nullable ? ' or null' : ''}`)
      return v
    },
    doc: (rule) =>
      rule.upperCase
        ? z.string().regex(new RegExp(`^(${[...rule.values, ...rule.values.map((v) => v.toLowerCase())].join('|')})$`))
        : z.enum(rule.values as [string, ...string[]]),
  },
  country: {
    check(_, value: string, field) {
      const match = countryOf(value)
      if (match && 'code' in match) return match.code
      if (match) throw new FieldError(`${field}: names more than one country (${match.ambiguous.join(', ')}); send its ISO 3166-1 alpha-2 code. Not stored`)
      throw new FieldError(`${field}: must be an ISO 3166-1 alpha-2 code, or a country's English name or alpha-3 code. Not stored`)
    },
    doc: () => z.string(),
    note: () => "ISO 3166-1 alpha-2, stored upper case; a country's English name or alias (United States, UK) or alpha-3 code is mapped to it",
  },
  url: {
    check(_, value: string, field) {
      const url = value.length <= URL_MAX && URL.canParse(value) ? new URL(value) : undefined
      if (url?.protocol !== 'http:' && url?.protocol !== 'https:') throw new FieldError(`${field}: must be an absolute http or https URL of at most ${URL_MAX} characters`)
      return value
    },
    doc: () => z.string().max(URL_MAX),
    note: () => 'an absolute http or https URL',
  },
  time: {
    check: (_, value: string, field) => (DATE.test(value) ? `${parseDate(value, field)}T00:00:00.000Z` : parseTime(value, field)),
    doc: () => z.string(),
    note: () => 'ISO 8601 with an offset or Z (a date alone: its midnight UTC), stored in UTC',
  },
  flag: {
    input: 'boolean',
    check: (_, value: boolean) => value,
    cleared: false,
    doc: () => z.boolean(),
    note: () => 'null clears it (false)',
  },
  coordinates: {
    input: 'object',
    check(_, value: object, field) {
      const r = Location.safeParse(value)
      if (!r.success) throw new FieldError(`${field}: must be {longitude, latitude}, numbers from -180 to 180 and from -90 to 90. Not stored`)
      return [r.data.longitude, r.data.latitude]
    },
    doc: () => Location,
    note: () => 'stored as last_coordinates [longitude, latitude]',
  },
  social: {
    input: 'object',
    check(rule, value: object, field) {
      const r = Social[rule.network].safeParse(value)
      if (!r.success) throw zodProblem(field, r.error.issues[0])
      return r.data
    },
    doc: (rule) => Social[rule.network],
  },
}
const kindOf = (rule: FieldRule) => RuleKinds[rule.kind] as RuleKind<FieldRule>

const INPUT_CHECKS = {
  string: (v: unknown) => typeof v === 'string',
  boolean: (v: unknown) => typeof v === 'boolean',
  object: isPlainObject,
}
const INPUT_NAMES = { string: 'a string', boolean: 'true, false', object: 'an object' }

/**
 * A profile field an attributes object sets, by its `member` (the field's name unless the table
 * says otherwise): checked and normalized by its rule; `null` clears it where it may be cleared.
 */
export function standardField(member: string, value: unknown, field: string): ProfileFieldValue | null {
  const rule = SettableFieldRules.get(member)!
  const kind = kindOf(rule)
  if (value === null) {
    if (rule.notNull) throw new FieldError(`${field}: cannot be null`)
    return kind.cleared ?? null
  }
  const input = kind.input ?? 'string'
  if (!INPUT_CHECKS[input](value)) throw new FieldError(`${field}: must be ${INPUT_NAMES[input]} or null`)
  return kind.check(rule, value as never, field, !rule.notNull)
}

/**
 * The document's schema of each settable profile field, by member, from the same rules. A field
 * checked `alone` takes any value (a bad one is a non-fatal error of its own), which its
 * description says.
 */
export const StandardFieldDocs: Record<string, z.ZodType> = Object.fromEntries(
  [...SettableFieldRules].map(([member, rule]) => {
    const kind = kindOf(rule)
    const valid = rule.notNull ? kind.doc(rule) : kind.doc(rule).nullable()
    const schema = (rule.alone ? z.union([valid, z.unknown()]) : valid).optional()
    const notes = [kind.note?.(rule), rule.alone && 'another value is a non-fatal error of this field alone, and the rest of the object applies'].filter(Boolean)
    return [member, notes.length ? schema.describe(notes.join('; ')) : schema]
  }),
)

export function customAttribute(name: string, value: unknown, field: string): unknown {
  if (name.length === 0 || name.length > 255) throw new FieldError(`${field}: attribute names must be 1 to 255 characters`)
  const problem = customAttributeProblem(value)
  if (problem) throw new FieldError(`${field}: ${problem}`)
  return value
}

/** How the document shows a custom attribute (customAttributeProblem, shared/domain/attributes.ts, checks it). */
export const CustomAttributeDoc = z
  .union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(z.unknown()),
    z.object({ inc: z.number().int() }).strict(),
    z.object({ add: z.array(z.unknown()).optional(), remove: z.array(z.unknown()).optional() }).strict(),
    z
      .object({
        $add: z.array(z.record(z.string(), z.unknown())).optional(),
        $update: z.array(z.object({ $identifier_key: z.string().min(1).max(255), $identifier_value: z.union([z.string(), z.number(), z.boolean()]), $new_object: z.record(z.string(), z.unknown()) }).strict()).optional(),
        $remove: z.array(z.object({ $identifier_key: z.string().min(1).max(255), $identifier_value: z.union([z.string(), z.number(), z.boolean()]) }).strict()).optional(),
      })
      .strict(),
    z.record(z.string(), z.unknown()),
  ])
  .describe(
    'A custom attribute (name of 1 to 255 characters): a value, an array, {inc: n} to add to a number, {add, remove} to edit an array, ' +
      '{$add, $update, $remove} to edit an array of objects by an item member ($identifier_key) and its value ($identifier_value), an object ' +
      '(deep-merged into the one stored with _merge_objects), or null to remove it. An object or array of objects is at most 100 KB of JSON.',
  )
