import { parsePhoneNumberFromString } from 'libphonenumber-js'

/** A valid phone number in E.164, or undefined. Numbers without a country code are not guessed. */
export function toE164(input: string): string | undefined {
  const parsed = parsePhoneNumberFromString(input.trim().startsWith('+') ? input.trim() : `+${input.trim()}`)
  return parsed?.isValid() ? parsed.number : undefined
}
