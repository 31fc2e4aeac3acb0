import { describe, expect, it } from 'vitest'
import { IncomingMessage } from 'node:http'
import { Socket } from 'node:net'
import { jsonProblem, MAX_JSON_DEPTH, noteUnicodeEscapes, textsMayHoldProblems } from '../../../services/api/validation.js'

/** A value nested `levels` deep: objects and arrays in turn, a string at the bottom. */
function nested(levels: number): unknown {
  let v: unknown = 'leaf'
  for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { n: v }
  return v
}

describe('jsonProblem', () => {
  it('finds nothing in ordinary JSON, however wide', () => {
    expect(jsonProblem({ a: 'x', b: [1, null, true, { c: 'ünï €', d: [] }], e: {} })).toBeUndefined()
    expect(jsonProblem(nested(MAX_JSON_DEPTH))).toBeUndefined()
  })

  it('names the first string or key Postgres cannot store, in document order', () => {
    expect(jsonProblem({ a: 'ok', b: [{ c: 'x\u0000y' }], z: '\u0000' })).toEqual({ path: ['b', 0, 'c'], message: 'must not contain the NUL character (\\u0000)' })
    expect(jsonProblem({ a: { ['k\ud800']: 1 } })).toEqual({ path: ['a'], message: 'keys must not contain an unpaired surrogate (\\ud800 to \\udfff), which is not Unicode' })
    expect(jsonProblem(['\ud83d\ude00', 'pair'])).toBeUndefined()
  })

  it('refuses nesting deeper than the limit, at the level that crosses it', () => {
    const problem = jsonProblem(nested(MAX_JSON_DEPTH + 1))
    expect(problem?.message).toBe(`is nested deeper than ${MAX_JSON_DEPTH} levels`)
    expect(problem?.path).toHaveLength(MAX_JSON_DEPTH)
  })
})

describe('jsonProblem on a body whose texts need no look', () => {
  it('still refuses nesting deeper than the limit, as the full look does', () => {
    expect(jsonProblem(nested(MAX_JSON_DEPTH), false)).toBeUndefined()
    expect(jsonProblem(nested(MAX_JSON_DEPTH + 1), false)).toEqual(jsonProblem(nested(MAX_JSON_DEPTH + 1)))
    expect(jsonProblem([{ a: [nested(MAX_JSON_DEPTH - 1)] }], false)?.message).toBe(`is nested deeper than ${MAX_JSON_DEPTH} levels`)
    expect(jsonProblem('x', false)).toBeUndefined()
  })
})

describe('noteUnicodeEscapes', () => {
  const request = () => new IncomingMessage(new Socket())
  const noted = (text: string, charset = 'utf-8') => {
    const req = request()
    noteUnicodeEscapes(req, undefined, Buffer.from(text, charset === 'utf-8' ? 'utf8' : 'utf16le'), charset)
    return textsMayHoldProblems(req)
  }

  it('clears the texts of UTF-8 JSON without a \\u escape, whatever else they hold', () => {
    expect(noted(JSON.stringify({ a: 'ünï € \\ "q" 😀', b: ['\t\n'] }))).toBe(false)
  })

  it('keeps the look for a \\u escape (even one a backslash escapes), for UTF-16 text, and for a request never noted', () => {
    expect(noted(JSON.stringify({ a: 'x\u0000y' }))).toBe(true)
    expect(noted(JSON.stringify({ a: 'x\ud800' }))).toBe(true)
    expect(noted('{"a":"\\\\u0041"}')).toBe(true)
    expect(noted(JSON.stringify({ a: 'plain' }), 'utf-16le')).toBe(true)
    expect(textsMayHoldProblems(request())).toBe(true)
  })
})
