import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { arrayLiteral, createPool, IDLE_CONNECTION_MS, query } from '../../../shared/db/pool.js'
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

describe('idle connections', () => {
  // pg-pool closes a connection idle for 10 s by default; a backend opened again pays anew for
  // the shared buffers it touches (shared/db/pool.ts).
  it('stay open through a lull longer than pg-pool default, so the same backends serve the next burst', async () => {
    expect(IDLE_CONNECTION_MS).toBeGreaterThan(11_000)
    const pool = createPool(env.config.DATABASE_URL, 3)
    try {
      const burst = async () =>
        new Set(
          await Promise.all(
            [0, 1, 2].map(() => query<{ pid: number }>(pool, 'test', 'SELECT pg_backend_pid() AS pid, pg_sleep(0.2)').then((r) => r.rows[0].pid)),
          ),
        )
      const first = await burst()
      expect(first.size).toBe(3)
      await new Promise((r) => setTimeout(r, 11_000))
      expect(pool.idleCount).toBe(3)
      expect(await burst()).toEqual(first)
    } finally {
      await pool.end()
    }
  }, 30_000)
})
