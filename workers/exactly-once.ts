import type pg from 'pg'
import { withTransaction, type Pool } from '../shared/db/pool.js'
import { completeJobs, ledgerEntries, recordAppliedBatch, type BatchOutbox } from '../shared/db/repositories/job-ledger-repository.js'
import { RetryableError } from '../shared/errors.js'
import type { JobName, JobOf } from '../shared/queue/jobs.js'
import { ok, type BatchEntry, type BatchProcessor } from './runner.js'

class AlreadyApplied extends Error {}

/** Postgres unique_violation. */
const UNIQUE_VIOLATION = '23505'

/** What a batch's transaction committed: each job's non-fatal errors and what the batch owes downstream. */
export interface Committed<Carry> {
  errors: Map<string, unknown[]>
  outbox: BatchOutbox
  /** What the commit knows in memory that delivery would otherwise read back (e.g. snapshots). */
  carry: Carry
}

/** A job whose effects committed, with the outbox of the batch it committed in. */
export interface OwedJob<N extends JobName> {
  key: string
  entry: BatchEntry<N>
  outbox: BatchOutbox
}

/**
 * A batch processor split at its commit: `commit` applies new jobs inside one Postgres
 * transaction, `deliver` writes what they owe elsewhere (ClickHouse), and must be idempotent: an
 * attempt that crashed after the commit delivers again.
 */
export interface TransactionalProcessor<N extends JobName, Carry> extends Omit<BatchProcessor<N>, 'apply'> {
  /** Names the job's ledger row: `${ledgerName}:${job id}`. */
  ledgerName: string
  /** Objects a job applies, for its outcome. */
  objects(data: JobOf<N>): number
  commit(db: pg.PoolClient, fresh: { key: string; entry: BatchEntry<N> }[]): Promise<Committed<Carry>>
  /** `owed` holds this attempt's jobs and earlier attempts' that committed but did not deliver; `carry` is this attempt's. */
  deliver(owed: OwedJob<N>[], outboxes: BatchOutbox[], carry: Carry | undefined): Promise<void>
}

/**
 * Wraps a processor so each job's effects apply exactly once, whatever instant a crash strikes:
 * the ledger tells which jobs an earlier attempt committed; the others commit in one transaction
 * with a ledger row per job and the batch's outbox on the first; then every outbox still owed is
 * delivered and its jobs marked completed. A unique violation while committing (two workers
 * creating the same row) is retryable; a ledger row recorded meanwhile by another worker (whose
 * lock had expired) rolls the transaction back and the batch starts over.
 *
 * `yieldTo` is awaited before each step (commit, delivery, completion): a batch already running
 * then leaves the cores to work that must go first (the API's ClickHouse reads) instead of
 * finishing beside it.
 */
export function exactlyOnce<N extends JobName, Carry>(
  pool: Pool,
  processor: TransactionalProcessor<N, Carry>,
  yieldTo: () => Promise<void> = async () => {},
): BatchProcessor<N> {
  const attempt = async (batch: BatchEntry<N>[]): Promise<Map<string, unknown[]>> => {
    const members = batch.map((entry) => ({ key: `${processor.ledgerName}:${entry.id}`, entry }))
    const ledger = await ledgerEntries(pool, members.map((m) => m.key))
    const fresh = members.filter((m) => !ledger.has(m.key))
    let committed: Committed<Carry> | undefined
    if (fresh.length) {
      await yieldTo()
      try {
        committed = await withTransaction(pool, async (db) => {
          const result = await processor.commit(db, fresh).catch((e) => {
            // Another worker created the same profile (an external id, an alias) at once: the retry finds its row.
            throw (e as { code?: string }).code === UNIQUE_VIOLATION ? new RetryableError('concurrent profile creation', e) : e
          })
          const rows = fresh.map((m) => ({ key: m.key, workspaceId: (m.entry.data as { workspaceId: string }).workspaceId, errors: result.errors.get(m.key) ?? [] }))
          if (!(await recordAppliedBatch(db, rows, result.outbox))) throw new AlreadyApplied()
          return result
        })
      } catch (e) {
        if (!(e instanceof AlreadyApplied)) throw e
        return attempt(batch)
      }
    }

    // Owed: this attempt's jobs, and those an earlier attempt committed but did not deliver.
    const owed: OwedJob<N>[] = []
    const outboxes = new Map<string, BatchOutbox>()
    for (const m of members) {
      const entry = ledger.get(m.key)
      if (entry?.completed !== false) continue
      const outbox = entry.outbox ?? emptyOutbox
      outboxes.set(entry.batchKey, outbox)
      owed.push({ ...m, outbox })
    }
    if (committed) for (const m of fresh) owed.push({ ...m, outbox: committed.outbox })
    await yieldTo()
    await processor.deliver(owed, [...outboxes.values(), ...(committed ? [committed.outbox] : [])], committed?.carry)
    await yieldTo()
    await completeJobs(pool, owed.map((o) => o.key))

    const errors = new Map<string, unknown[]>()
    for (const m of members) errors.set(m.key, committed?.errors.get(m.key) ?? ledger.get(m.key)?.errors ?? [])
    return errors
  }

  return {
    maxWeight: processor.maxWeight,
    weight: processor.weight,
    joins: processor.joins,
    async apply(batch) {
      const errors = await attempt(batch)
      return batch.map((entry) => ok(processor.objects(entry.data), errors.get(`${processor.ledgerName}:${entry.id}`)))
    },
  }
}

/** The outbox of a batch whose first row was pruned (pruning keeps rows still owing delivery). */
const emptyOutbox: BatchOutbox = { owners: {}, profiles: [], deleted: [] }
