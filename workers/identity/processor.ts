import type pg from 'pg'
import { applyBatchExactlyOnce, type AppliedBatch } from '../../shared/domain/exactly-once.js'
import type { WorkerDeps } from '../deps.js'
import { ok, type BatchProcessor } from '../runner.js'
import { applyIdentityJobs, type KeyedIdentityJob } from './apply-batch.js'
import { waitForEarlierTrackWork } from './barrier.js'

/** Operations a batch may hold: ten requests of 50, still one short transaction. */
export const IDENTITY_BATCH_MAX_OPERATIONS = 500

/** A batch's new jobs applied inside the exactly-once transaction, with what ClickHouse is then owed. */
export async function applyIdentityTransaction(db: pg.PoolClient, fresh: KeyedIdentityJob[]): Promise<AppliedBatch> {
  const applied = await applyIdentityJobs(db, fresh, new Date().toISOString())
  return {
    outbox: { owners: {}, profiles: applied.changed, deleted: applied.deleted, overrides: applied.overrides },
    errors: applied.errors,
    snapshots: [],
    erased: applied.erased,
  }
}

/**
 * applyIdentityChange: the identity jobs waiting in the queue, applied together exactly once in
 * acceptance order, after the track work accepted before the newest of them (one wait for the
 * batch, see barrier.ts). Problems with the named users (nobody, several, the same user twice)
 * are non-fatal errors on the request; the job itself succeeds.
 */
export function createIdentityProcessor(deps: WorkerDeps): BatchProcessor<'applyIdentityChange'> {
  return {
    maxWeight: IDENTITY_BATCH_MAX_OPERATIONS,
    weight: (job) => job.operations.length,
    joins: () => true,
    async apply(batch) {
      await waitForEarlierTrackWork(deps.producer.queues, Math.max(...batch.map((b) => b.data.acceptedAt)))
      const members = batch.map((b) => ({ key: `identity:${b.id}`, workspaceId: b.data.workspaceId, job: b.data }))
      const errors = await applyBatchExactlyOnce(deps, members, applyIdentityTransaction, () => [])
      return members.map((m) => ok(m.job.operations.length, errors.get(m.key)))
    },
  }
}
