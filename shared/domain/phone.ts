import { parsePhoneNumberFromString } from 'libphonenumber-js'
import { z } from 'zod'

/**
 * Numbers seen lately and what they normalize to: parsing one weighs more than every other check of
 * an attributes object, and senders name the same users again and again. Bounded in entries and in
 * their length (no phone number is longer); emptied when full.
 */
const recent = new Map<string, string | undefined>()
const RECENT_MAX = 10_000
const REMEMBERED_LENGTH_MAX = 64

/** A valid phone number in E.164, or undefined. Numbers without a country code are not guessed. */
export function toE164(input: string): string | undefined {
  if (recent.has(input)) return recent.get(input)
  const trimmed = input.trim()
  const parsed = parsePhoneNumberFromString(trimmed.startsWith('+') ? trimmed : `+${trimmed}`)
  const e164 = parsed?.isValid() ? parsed.number : undefined
  if (input.length > REMEMBERED_LENGTH_MAX) return e164
  if (recent.size >= RECENT_MAX) recent.clear()
  recent.set(input, e164)
  return e164
}

/** A phone number a request names a user by, stored in E.164 (a number we cannot read is refused). */
export const PhoneNumber = z.string().transform((s, ctx) => {
  const e164 = toE164(s)
  if (!e164) ctx.addIssue({ code: 'custom', message: 'must be a valid phone number with country code (E.164)' })
  return e164 ?? z.NEVER
})
