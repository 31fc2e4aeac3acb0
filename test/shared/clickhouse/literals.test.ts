import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inlineQueryParams } from '../../../shared/clickhouse/literals.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

/** Runs `SELECT <expr> AS v` on the embedded engine and answers v. */
async function select(expr: string): Promise<unknown> {
  const rs = await env.clickhouse.client.query({ query: `SELECT ${expr} AS v`, format: 'JSONEachRow' })
  return ((await rs.json()) as { v: unknown }[])[0].v
}

describe('inlineQueryParams', () => {
  it('writes strings that read back exactly, whatever they hold', async () => {
    for (const s of ["it's", 'back\\slash', "\\'", 'tab\tline\nbreak', '{x:String}', 'ünï €', '', "'; DROP TABLE t; --"]) {
      expect(await select(inlineQueryParams('{s:String}', { s }))).toBe(s)
    }
  })

  it('writes numbers, unsigned integers and arrays of each', async () => {
    expect(await select(inlineQueryParams('{n:Float64}', { n: -1.5e-7 }))).toBe(-1.5e-7)
    expect(Number(await select(inlineQueryParams('{n:UInt64}', { n: '18446744073709551615' })))).toBe(18446744073709551615)
    expect(await select(inlineQueryParams('{n:UInt16}', { n: 9999 }))).toBe(9999)
    expect(await select(inlineQueryParams('{a:Array(String)}', { a: ["a'b", 'c'] }))).toEqual(["a'b", 'c'])
    expect(await select(inlineQueryParams('{a:Array(Float64)}', { a: [] }))).toEqual([])
    expect(await select(inlineQueryParams('{a:Array(UInt8)}', { a: [1, 0] }))).toEqual([1, 0])
  })

  it('refuses a value that does not fit its type, or a type it cannot write', () => {
    expect(() => inlineQueryParams('{n:UInt64}', { n: -1 })).toThrow(/non-negative integer/)
    expect(() => inlineQueryParams('{n:UInt64}', { n: '1 OR 1' })).toThrow(/non-negative integer/)
    expect(() => inlineQueryParams('{n:Float64}', { n: Number.NaN })).toThrow(/finite/)
    expect(() => inlineQueryParams('{s:String}', { s: 1 })).toThrow(/string/)
    expect(() => inlineQueryParams('{d:DateTime}', { d: 'now' })).toThrow(/cannot be written/)
    expect(() => inlineQueryParams('{missing:String}', {})).toThrow(/no value/)
  })
})
