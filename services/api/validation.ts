import type { IncomingMessage } from 'node:http'
import { z } from 'zod'
import { isPlainObject } from '../../shared/domain/attributes.js'
import { ApiError } from '../../shared/errors.js'

export function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length ? issue.path.map(String).join('.') : 'body'
  return `${field}: ${issue.message}`
}

/** Deeper JSON is refused before any schema sees it: recursive code (zod, JSON.stringify) overflows the stack. */
export const MAX_JSON_DEPTH = 64

/** Why Postgres could not store a string as it is, if it could not. */
function textProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'the NUL character (\\u0000)'
  // An unpaired UTF-16 surrogate (JSON may escape one, "\ud800"): not Unicode, and jsonb refuses it.
  if (!s.isWellFormed()) return 'an unpaired surrogate (\\ud800 to \\udfff), which is not Unicode'
  return undefined
}

/**
 * Whether any string, key or depth has a problem: the common answer (no) without building the
 * paths, which only the rare refusal needs. Recursive but bounded (it stops at MAX_JSON_DEPTH),
 * and allocation-free: a stack of values and an Object.keys array per object were a tenth of what
 * the API allocated under a mixed load.
 */
function anyProblem(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return textProblem(value) !== undefined
  if (value === null || typeof value !== 'object') return false
  if (depth >= MAX_JSON_DEPTH) return true
  if (Array.isArray(value)) {
    for (const x of value) if (anyProblem(x, depth + 1)) return true
    return false
  }
  for (const k in value) {
    if (textProblem(k) !== undefined || anyProblem((value as Record<string, unknown>)[k], depth + 1)) return true
  }
  return false
}

/** Whether any object or array nests deeper than MAX_JSON_DEPTH: anyProblem without its look at texts. */
function tooDeep(value: object, depth: number): boolean {
  if (depth >= MAX_JSON_DEPTH) return true
  if (Array.isArray(value)) {
    for (const x of value) if (x !== null && typeof x === 'object' && tooDeep(x, depth + 1)) return true
    return false
  }
  for (const k in value) {
    const x = (value as Record<string, unknown>)[k]
    if (x !== null && typeof x === 'object' && tooDeep(x, depth + 1)) return true
  }
  return false
}

/**
 * Requests whose body is UTF-8 JSON text holding no `\u` escape (noted by express.json's verify
 * hook, `noteUnicodeEscapes`). Only such an escape puts a NUL or an unpaired surrogate into a
 * parsed string or key: a raw control character is no JSON, and bytes that are no UTF-8 decode to
 * U+FFFD (UTF-16 text, which can carry a lone surrogate as it is, is always looked at). Their
 * texts need no look: five sixths of the check's time on a mixed /users/track body.
 */
const withoutUnicodeEscapes = new WeakSet<IncomingMessage>()
const UNICODE_ESCAPE = Buffer.from('\\u')

/** express.json's `verify`: notes whether the raw body is UTF-8 without a `\u` escape (a search for two bytes). */
export function noteUnicodeEscapes(req: IncomingMessage, _res: unknown, body: Buffer, charset: string): void {
  if (charset === 'utf-8' && !body.includes(UNICODE_ESCAPE)) withoutUnicodeEscapes.add(req)
}

/** Whether the strings and keys of a request's parsed body may hold what textProblem refuses. */
export const textsMayHoldProblems = (req: IncomingMessage): boolean => !withoutUnicodeEscapes.has(req)

/**
 * What no field rule should have to think of: a NUL character or an unpaired surrogate in a
 * string or a key (Postgres stores neither, so they failed as 500s, or as jobs failing in a
 * worker) or nesting deeper than MAX_JSON_DEPTH. The first one in document order, found without
 * recursion so that any depth is safe. `texts` false (textsMayHoldProblems) looks at depth only.
 */
export function jsonProblem(value: unknown, texts = true): { path: (string | number)[]; message: string } | undefined {
  if (!(texts ? anyProblem(value, 0) : value !== null && typeof value === 'object' && tooDeep(value, 0))) return undefined
  const stack: { v: unknown; path: (string | number)[] }[] = [{ v: value, path: [] }]
  while (stack.length) {
    const { v, path } = stack.pop()!
    if (typeof v === 'string') {
      const problem = textProblem(v)
      if (problem) return { path, message: `must not contain ${problem}` }
      continue
    }
    if (v === null || typeof v !== 'object') continue
    if (path.length >= MAX_JSON_DEPTH) return { path, message: `is nested deeper than ${MAX_JSON_DEPTH} levels` }
    const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v)
    for (const [k] of entries) {
      const problem = typeof k === 'string' ? textProblem(k) : undefined
      if (problem) return { path, message: `keys must not contain ${problem}` }
    }
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i][1], path: [...path, entries[i][0]] })
  }
  return undefined
}

/** Parses a body with its schema; a failure is a 400 whose message names the field. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const problem = jsonProblem(value)
  if (problem) {
    const message = `${problem.path.length ? problem.path.map(String).join('.') : 'body'}: ${problem.message}`
    throw new ApiError(400, 'bad_request', message, { errors: [message] })
  }
  const r = schema.safeParse(value)
  if (!r.success) {
    const errors = r.error.issues.map(describeIssue)
    throw new ApiError(400, 'bad_request', errors[0], { errors })
  }
  return r.data
}

const MAX_KEYS = 50

/**
 * A list sent as one string or as an array. The 'extended' query parser also turns
 * `external_id[]=` lists longer than 20 into objects keyed "0", "1", ...; those are lists too.
 */
function asList(value: unknown): unknown {
  if (typeof value === 'string') return [value]
  if (isPlainObject(value) && Object.keys(value).every((k) => /^\d+$/.test(k))) {
    return Object.entries(value)
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([, v]) => v)
  }
  return value
}

/** A string or an array of `min` to 50 items (the keys one request may name, interface.md); the message of a refusal names the field and the limit. */
export function upTo50<T extends z.ZodType>(item: T, noun: string, min = 1) {
  return z.preprocess(
    asList,
    z
      .array(item)
      .min(min, `must hold at least ${min} ${noun}`)
      .max(MAX_KEYS, `must hold at most ${MAX_KEYS} ${noun} per request`),
  )
}
