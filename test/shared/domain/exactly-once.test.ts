import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ledgerEntries } from '../../../shared/db/repositories/job-ledger-repository.js'
import { applyBatchExactlyOnce } from '../../../shared/domain/exactly-once.js'
import { RetryableError } from '../../../shared/errors.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

describe('applying a batch exactly once', () => {
  it('makes a unique violation while applying (another worker created the same row first) retryable, and commits nothing', async () => {
    const name = `taken-${randomUUID()}`
    await env.ctx.pg.query('INSERT INTO workspaces (id, name) VALUES ($1, $2)', [randomUUID(), name])
    const key = `test:${randomUUID()}`
    const applying = applyBatchExactlyOnce(
      { pg: env.ctx.pg, clickhouse: env.clickhouse },
      [{ key, workspaceId: 'ws' }],
      async (db) => {
        await db.query('INSERT INTO workspaces (id, name) VALUES ($1, $2)', [randomUUID(), name])
        throw new Error('unreachable: the insert above violates workspaces.name')
      },
      () => [],
    )
    await expect(applying).rejects.toBeInstanceOf(RetryableError)
    await expect(applying).rejects.toMatchObject({ cause: { code: '23505' } })
    expect((await ledgerEntries(env.ctx.pg, [key])).size).toBe(0)
  })
})
