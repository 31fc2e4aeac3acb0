import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { readSnapshots } from '../../shared/clickhouse/snapshot-repository.js'
import { withTransaction } from '../../shared/db/pool.js'
import { findDeprecatedExternalIds } from '../../shared/db/repositories/external-id-repository.js'
import { recordAppliedBatch } from '../../shared/db/repositories/job-ledger-repository.js'
import { ReadPriority } from '../../workers/engine/priority.js'
import { applyIdentityTransaction, createIdentityProcessor } from '../../workers/identity/processor.js'
import { occurrenceRecency } from '../../workers/occurrence-recency.js'
import type { IdentityJob } from '../../shared/queue/identity-jobs.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

/** Renames, removals and alias changes applied by the identity worker: once, in order, and delivered to ClickHouse. */
let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
})
afterAll(async () => {
  await env.close()
})
beforeEach(async () => {
  ws = await env.workspace()
})

async function profileIdOf(externalId: string): Promise<number> {
  const { rows } = await env.ctx.pg.query<{ id: string }>('SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, externalId])
  return Number(rows[0].id)
}

function processor() {
  return createIdentityProcessor({
    config: env.config, logger: env.ctx.logger, pg: env.ctx.pg, clickhouse: env.clickhouse,
    producer: { queues: env.ctx.queues, tracker: env.ctx.tracker }, metrics: env.metrics,
    readsFirst: () => new ReadPriority().yield(),
  })
}

describe('identity migration operations, exactly once', () => {
  it('applies a rename once when the worker died after the Postgres commit, and delivers the renamed snapshot', async () => {
    await env.writeAndWait(ws.key, '/users/track', { attributes: [{ external_id: 'r-old', first_name: 'Ann' }] })
    const id = await profileIdOf('r-old')
    const job: IdentityJob = {
      workspaceId: ws.id,
      requestId: `rename-${ws.id}`,
      acceptedAt: Date.now(),
      operations: [
        { type: 'rename_external_id', index: 0, currentExternalId: 'r-old', newExternalId: 'r-new' },
        { type: 'alias_new', index: 0, externalId: 'r-old', alias: { alias_name: 'n', alias_label: 'l' } },
        { type: 'alias_update', index: 0, alias_label: 'l', old_alias_name: 'n', new_alias_name: 'n2' },
      ],
    }
    const key = `identity:rename-${ws.id}`
    await withTransaction(env.ctx.pg, async (db) => {
      const applied = await applyIdentityTransaction(db, [{ key, job }], occurrenceRecency(env.clickhouse, db))
      expect(applied.errors).toEqual(new Map([[key, []]]))
      expect(await recordAppliedBatch(db, [{ key, workspaceId: ws.id, errors: [] }], applied.outbox)).toBe(true)
    })
    // Replayed twice: the ledger holds the batch, so nothing applies again, and its outbox reaches ClickHouse.
    const p = processor()
    for (let attempt = 0; attempt < 2; attempt++) {
      expect(await p.apply([{ id: `rename-${ws.id}`, data: job }])).toEqual([{ status: 'ok', applied: 3, errors: [] }])
    }
    const [user] = (await env.readUsers(ws.key, { external_ids: ['r-new'] })).users
    expect(user).toMatchObject({ external_id: 'r-new', first_name: 'Ann', user_aliases: [{ alias_name: 'n2', alias_label: 'l' }] })
    expect(await findDeprecatedExternalIds(env.ctx.pg, ws.id, ['r-old', 'r-new'])).toEqual([
      { external_id: 'r-old', profile_id: id, service_id: user.service_id },
    ])
    const snapshot = (await readSnapshots(env.clickhouse, ws.id, [id])).get(id)
    expect(snapshot).toMatchObject({ external_id: 'r-new', user_aliases: [{ alias_name: 'n2', alias_label: 'l' }] })
  })

  it('resolves operations of one batch against what earlier ones left: a rename chain, and a remove then a reuse', async () => {
    await env.writeAndWait(ws.key, '/users/track', { attributes: [{ external_id: 'c1' }, { external_id: 'other' }] })
    const job = (n: number, operations: IdentityJob['operations']): { id: string; data: IdentityJob } => ({
      id: `chain-${ws.id}-${n}`,
      data: { workspaceId: ws.id, requestId: `chain-${ws.id}-${n}`, acceptedAt: Date.now(), operations },
    })
    const results = await processor().apply([
      job(0, [{ type: 'rename_external_id', index: 0, currentExternalId: 'c1', newExternalId: 'c2' }]),
      job(1, [{ type: 'rename_external_id', index: 0, currentExternalId: 'c2', newExternalId: 'c3' }]),
      job(2, [{ type: 'remove_external_id', index: 0, externalId: 'c1' }]),
      job(3, [{ type: 'rename_external_id', index: 0, currentExternalId: 'other', newExternalId: 'c1' }]),
    ])
    expect(results.map((r) => (r as { errors: unknown[] }).errors)).toEqual([[], [], [], []])
    const [renamed] = (await env.readUsers(ws.key, { external_ids: ['c3'] })).users
    expect((await env.readUsers(ws.key, { external_ids: ['c2'] })).users).toEqual([renamed])
    expect((await env.readUsers(ws.key, { external_ids: ['c1'] })).users[0].service_id).not.toBe(renamed.service_id)
    expect((await env.readUsers(ws.key, { external_ids: ['other'] })).users[0].external_id).toBe('c1')
  })
})
