import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ledgerEntries } from '../../shared/db/repositories/job-ledger-repository.js'
import { RetryableError } from '../../shared/errors.js'
import type { JobOf } from '../../shared/queue/jobs.js'
import { exactlyOnce, type OwedJob, type TransactionalProcessor } from '../../workers/exactly-once.js'
import { ReadPriority } from '../../workers/engine/priority.js'
import type { BatchEntry } from '../../workers/runner.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

/** A job of the test processor: its effect is a workspace row named `name`. */
const job = (name: string): BatchEntry<'applyTrackBatch'> => ({ id: randomUUID(), data: { workspaceId: 'ws', name } as unknown as JobOf<'applyTrackBatch'> })
const nameOf = (e: BatchEntry<'applyTrackBatch'>) => (e.data as unknown as { name: string }).name

/**
 * A processor whose commit inserts a workspace per job (unique names: a second insert of the same
 * name fails) and whose delivery is recorded, failing while `failDelivery` is set.
 */
function workspaceWriter(opts: { failDelivery?: boolean } = {}) {
  const commits: string[][] = []
  const deliveries: { owed: OwedJob<'applyTrackBatch'>[]; carry: string | undefined }[] = []
  const processor: TransactionalProcessor<'applyTrackBatch', string> = {
    ledgerName: 'test',
    maxWeight: 100,
    weight: () => 1,
    joins: () => true,
    objects: () => 1,
    async commit(db, fresh) {
      commits.push(fresh.map((f) => nameOf(f.entry)))
      for (const f of fresh) await db.query('INSERT INTO workspaces (id, name) VALUES ($1, $2)', [randomUUID(), nameOf(f.entry)])
      return {
        errors: new Map(fresh.map((f) => [f.key, [{ job: nameOf(f.entry) }]])),
        outbox: { owners: Object.fromEntries(fresh.map((f) => [f.key, [fresh.indexOf(f)]])), profiles: [], deleted: [] },
        carry: `carry of ${fresh.length}`,
      }
    },
    async deliver(owed, _outboxes, carry) {
      if (opts.failDelivery) throw new Error('downstream away')
      deliveries.push({ owed, carry })
    },
  }
  return { processor, commits, deliveries }
}

async function workspacesNamed(names: string[]): Promise<number> {
  const r = await env.ctx.pg.query('SELECT count(*)::int AS n FROM workspaces WHERE name = ANY($1)', [names])
  return r.rows[0].n
}

describe('a processor wrapped exactly once', () => {
  it('commits a batch once, delivers it with its carry, marks its jobs completed and answers each job its errors', async () => {
    const batch = [job(`a-${randomUUID()}`), job(`b-${randomUUID()}`)]
    const { processor, commits, deliveries } = workspaceWriter()
    const outcomes = await exactlyOnce(env.ctx.pg, processor).apply(batch)
    expect(outcomes).toEqual(batch.map((e) => ({ status: 'ok', applied: 1, errors: [{ job: nameOf(e) }] })))
    expect(commits).toEqual([batch.map(nameOf)])
    expect(deliveries).toHaveLength(1)
    expect(deliveries[0].carry).toBe('carry of 2')
    expect(deliveries[0].owed.map((o) => [o.key, o.outbox.owners[o.key]])).toEqual([
      [`test:${batch[0].id}`, [0]],
      [`test:${batch[1].id}`, [1]],
    ])
    const ledger = await ledgerEntries(env.ctx.pg, deliveries[0].owed.map((o) => o.key))
    expect([...ledger.values()].map((l) => l.completed)).toEqual([true, true])
  })

  it('after a commit whose delivery failed, delivers the stored outbox again without applying the jobs twice, and a later job joins', async () => {
    const committed = [job(`c-${randomUUID()}`), job(`d-${randomUUID()}`)]
    const first = workspaceWriter({ failDelivery: true })
    await expect(exactlyOnce(env.ctx.pg, first.processor).apply(committed)).rejects.toThrow('downstream away')
    expect(await workspacesNamed(committed.map(nameOf))).toBe(2)

    const later = job(`e-${randomUUID()}`)
    const retry = workspaceWriter()
    const outcomes = await exactlyOnce(env.ctx.pg, retry.processor).apply([...committed, later])
    // Only the new job is committed; the earlier ones keep the errors their first attempt recorded.
    expect(retry.commits).toEqual([[nameOf(later)]])
    expect(outcomes.map((o) => (o as { errors: unknown[] }).errors)).toEqual([...committed, later].map((e) => [{ job: nameOf(e) }]))
    expect(await workspacesNamed([...committed, later].map(nameOf))).toBe(3)
    // Delivered: the first attempt's jobs with their stored outbox, the new one with its own.
    expect(retry.deliveries[0].owed.map((o) => [nameOf(o.entry), o.outbox.owners[o.key]])).toEqual([
      [nameOf(committed[0]), [0]],
      [nameOf(committed[1]), [1]],
      [nameOf(later), [0]],
    ])
  })

  it('neither commits nor delivers jobs already completed', async () => {
    const batch = [job(`f-${randomUUID()}`)]
    await exactlyOnce(env.ctx.pg, workspaceWriter().processor).apply(batch)
    const again = workspaceWriter()
    await exactlyOnce(env.ctx.pg, again.processor).apply(batch)
    expect(again.commits).toEqual([])
    expect(again.deliveries[0].owed).toEqual([])
    expect(await workspacesNamed(batch.map(nameOf))).toBe(1)
  })

  it('makes a unique violation while committing (another worker created the same row first) retryable, and records nothing', async () => {
    const name = `taken-${randomUUID()}`
    await env.ctx.pg.query('INSERT INTO workspaces (id, name) VALUES ($1, $2)', [randomUUID(), name])
    const entry = job(name)
    const applying = exactlyOnce(env.ctx.pg, workspaceWriter().processor).apply([entry])
    await expect(applying).rejects.toBeInstanceOf(RetryableError)
    await expect(applying).rejects.toMatchObject({ cause: { code: '23505' } })
    expect((await ledgerEntries(env.ctx.pg, [`test:${entry.id}`])).size).toBe(0)
  })

  it('lets a read that starts while a batch runs go first: the batch commits or delivers only once the read is over', async () => {
    const priority = new ReadPriority()
    let endRead!: () => void
    const read = priority.run(() => new Promise<void>((resolve) => (endRead = resolve)))
    const batch = [job(`r-${randomUUID()}`)]
    const { processor, commits, deliveries } = workspaceWriter()
    const applying = exactlyOnce(env.ctx.pg, processor, () => priority.yield()).apply(batch)
    await new Promise((r) => setTimeout(r, 200))
    expect(commits).toEqual([])
    expect(await workspacesNamed(batch.map(nameOf))).toBe(0)
    endRead()
    await read
    expect((await applying).map((o) => o.status)).toEqual(['ok'])
    expect(commits).toEqual([batch.map(nameOf)])
    expect(deliveries).toHaveLength(1)
    expect(await workspacesNamed(batch.map(nameOf))).toBe(1)
  })
})
