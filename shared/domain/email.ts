import { z } from 'zod'

/** RFC 5321's limit; longer addresses would also overflow the index rows that hold them. */
const MAX_EMAIL_LENGTH = 254
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** Emails match case-insensitively; they are stored trimmed and lower-cased. */
export function normalizeEmail(input: string): string {
  return input.trim().toLowerCase()
}

/**
 * What is wrong with an email address a caller sent, or undefined when it is valid; surrounding
 * spaces do not count. The length goes first, so that an over-long input never reaches the pattern.
 */
export function emailProblem(input: unknown): string | undefined {
  if (typeof input !== 'string') return 'must be a valid email address'
  const address = input.trim()
  if (address.length > MAX_EMAIL_LENGTH) return `must be at most ${MAX_EMAIL_LENGTH} characters`
  if (!EMAIL_PATTERN.test(address)) return 'must be a valid email address'
  return undefined
}

/** An email address in a request body: checked by emailProblem, answered normalized. */
export const EmailAddress = z
  .string()
  .check((ctx) => {
    const problem = emailProblem(ctx.value)
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value })
  })
  .transform(normalizeEmail)
  .meta({ maxLength: MAX_EMAIL_LENGTH, pattern: EMAIL_PATTERN.source })
