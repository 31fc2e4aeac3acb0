import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { arrayLiteral, query } from '../../../shared/db/pool.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

describe('array parameters', () => {
  it('reach Postgres element for element, whatever the strings hold', async () => {
    const texts = ['plain', 'with "quotes"', 'back\\slash', 'a,comma', '{braces}', ' spaced ', '', 'NULL', 'ünï €', "it's"]
    const r = await query<{ t: string[]; n: string; e: string[] }>(env.ctx.pg, 'arrays', 'SELECT $1::text[] AS t, $2::bigint[]::text AS n, $3::text[] AS e', [
      texts,
      [1, 9_007_199_254_740_991, 0],
      [],
    ])
    expect(r.rows[0]).toEqual({ t: texts, n: '{1,9007199254740991,0}', e: [] })
  })

  it('leave arrays holding anything but strings and numbers to pg', async () => {
    expect(arrayLiteral(['a', null])).toBeUndefined()
    const r = await query<{ t: (string | null)[] }>(env.ctx.pg, 'arrays', 'SELECT $1::text[] AS t', [['a', null]])
    expect(r.rows[0].t).toEqual(['a', null])
  })
})
