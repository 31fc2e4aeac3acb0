import { describe, expect, it } from 'vitest'
import { jsonProblem, MAX_JSON_DEPTH } from '../../../services/api/validation.js'

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
