import { z } from 'zod'
import { customAttributeProblem, isPlainObject } from './attributes.js'
import { emailProblem, normalizeEmail } from './email.js'
import type { Identifier } from './identifiers.js'
import { toE164 } from './phone.js'

/** A problem with one field of one object; the message names the field. */
export class FieldError extends Error {}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i

/** ISO 8601 with an offset or Z, normalized to UTC with milliseconds. */
export function parseTime(value: unknown, field: string): string {
  const ms = typeof value === 'string' && ISO_TIME.test(value) ? Date.parse(value) : NaN
  if (Number.isNaN(ms)) throw new FieldError(`${field}: must be an ISO 8601 timestamp with an offset or Z, e.g. 2024-05-01T12:00:00Z`)
  return new Date(ms).toISOString()
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

function nonEmptyString(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new FieldError(`${field}: must be a non-empty string`)
  if (value.length > 512) throw new FieldError(`${field}: must be at most 512 characters`)
  return value
}

export const UserAlias = z.object({ alias_name: z.string().min(1).max(512), alias_label: z.string().min(1).max(512) }).strict()

function parseAlias(value: unknown, field: string): { alias_name: string; alias_label: string } {
  const r = UserAlias.safeParse(value)
  if (!r.success) throw new FieldError(`${field}: must be an object with string alias_name and alias_label`)
  return r.data
}

/**
 * The identifier of a track object: exactly one of external_id, user_alias, service_id; or
 * else email, then phone (which are also profile fields when another identifier is present).
 */
export function identifierOf(obj: Record<string, unknown>, prefix: string): Identifier {
  const primary = (['external_id', 'user_alias', 'service_id'] as const).filter((k) => obj[k] !== undefined)
  if (primary.length > 1) throw new FieldError(`${prefix}: send exactly one of external_id, user_alias, service_id (got ${primary.join(', ')})`)
  if (obj.external_id !== undefined) return { kind: 'external_id', value: nonEmptyString(obj.external_id, `${prefix}.external_id`) }
  if (obj.user_alias !== undefined) return { kind: 'user_alias', ...parseAlias(obj.user_alias, `${prefix}.user_alias`) }
  if (obj.service_id !== undefined) return { kind: 'service_id', value: nonEmptyString(obj.service_id, `${prefix}.service_id`) }
  if (obj.email !== undefined && obj.email !== null) return { kind: 'email', value: parseEmail(obj.email, `${prefix}.email`) }
  if (obj.phone !== undefined && obj.phone !== null) return { kind: 'phone', value: parsePhone(obj.phone, `${prefix}.phone`) }
  throw new FieldError(`${prefix}: one of external_id, user_alias, service_id, email or phone is required to identify the user`)
}

export function properties(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined) return {}
  if (!isPlainObject(value)) throw new FieldError(`${field}: must be an object`)
  return value
}

const SUBSCRIBE_STATES = ['opted_in', 'subscribed', 'unsubscribed']
const GENDERS = ['M', 'F', 'O', 'N', 'P']

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz })
    return true
  } catch {
    return false
  }
}

/** Standard profile fields: validated and normalized; `null` clears a field. */
export function standardField(name: string, value: unknown, field: string): string | null {
  if (value === null) {
    if (name === 'email_subscribe' || name === 'push_subscribe') throw new FieldError(`${field}: cannot be null`)
    return null
  }
  if (typeof value !== 'string') throw new FieldError(`${field}: must be a string or null`)
  switch (name) {
    case 'email':
      return parseEmail(value, field)
    case 'phone':
      return parsePhone(value, field)
    case 'gender': {
      const g = value.toUpperCase()
      if (!GENDERS.includes(g)) throw new FieldError(`${field}: must be one of M, F, O, N, P or null`)
      return g
    }
    case 'dob':
      if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(Date.parse(`${value}T00:00:00Z`))) throw new FieldError(`${field}: must be a date YYYY-MM-DD`)
      return value
    case 'country':
      if (!/^[A-Za-z]{2}$/.test(value)) throw new FieldError(`${field}: must be an ISO 3166-1 alpha-2 code`)
      return value.toUpperCase()
    case 'language':
      if (!/^[A-Za-z]{2}$/.test(value)) throw new FieldError(`${field}: must be an ISO 639-1 code`)
      return value.toLowerCase()
    case 'time_zone':
      if (!validTimeZone(value)) throw new FieldError(`${field}: must be an IANA time zone such as America/New_York`)
      return value
    case 'email_subscribe':
    case 'push_subscribe':
      if (!SUBSCRIBE_STATES.includes(value)) throw new FieldError(`${field}: must be one of ${SUBSCRIBE_STATES.join(', ')}`)
      return value
    default:
      if (value.length > 10_000) throw new FieldError(`${field}: must be at most 10000 characters`)
      return value
  }
}

export function customAttribute(name: string, value: unknown, field: string): unknown {
  if (name.length === 0 || name.length > 255) throw new FieldError(`${field}: attribute names must be 1 to 255 characters`)
  const problem = customAttributeProblem(value)
  if (problem) throw new FieldError(`${field}: ${problem}`)
  return value
}
