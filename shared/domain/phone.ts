import { parsePhoneNumberFromString } from 'libphonenumber-js'

/** A valid phone number in E.164, or undefined. Numbers without a country code are not guessed. */
export function toE164(input: string): string | undefined {
  const parsed = parsePhoneNumberFromString(input.trim().startsWith('+') ? input.trim() : `+${input.trim()}`)
  return parsed?.isValid() ? parsed.number : undefined
}

/** Emails match case-insensitively; they are stored trimmed and lower-cased. */
export function normalizeEmail(input: string): string {
  return input.trim().toLowerCase()
}

export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
