import type pg from 'pg'
import { recordErasures } from '../../shared/db/repositories/override-repository.js'
import type { LastOccurrences } from '../../shared/domain/prioritization.js'
import { deliverToClickHouse } from '../clickhouse-delivery.js'
import type { WorkerDeps } from '../deps.js'
import { exactlyOnce, type Committed } from '../exactly-once.js'
import { occurrenceRecency } from '../occurrence-recency.js'
import type { BatchProcessor } from '../runner.js'
import { applyIdentityJobs, type KeyedIdentityJob } from './apply-batch.js'
import { waitForEarlierTrackWork } from './barrier.js'

/** Operations a batch may hold: ten requests of 50, still one short transaction. */
export const IDENTITY_BATCH_MAX_OPERATIONS = 500

/** A batch's new jobs applied inside the exactly-once transaction, with what ClickHouse is then owed. */
export async function applyIdentityTransaction(db: pg.PoolClient, fresh: KeyedIdentityJob[], recency: LastOccurrences): Promise<Committed<undefined>> {
  const applied = await applyIdentityJobs(db, fresh, new Date().toISOString(), recency)
  await recordErasures(db, applied.erased)
  return {
    outbox: { owners: {}, profiles: applied.changed, deleted: applied.deleted, overrides: applied.overrides },
    errors: applied.errors,
    carry: undefined,
  }
}

/**
 * applyIdentityChange: the identity jobs waiting in the queue, applied together exactly once in
 * acceptance order, after the track work accepted before the newest of them (one wait for the
 * batch, see barrier.ts). Problems with the named users (nobody, several, the same user twice)
 * are non-fatal errors on the request; the job itself succeeds.
 */
export function createIdentityProcessor(deps: WorkerDeps): BatchProcessor<'applyIdentityChange'> {
  const processor = exactlyOnce<'applyIdentityChange', undefined>(deps.pg, {
    ledgerName: 'identity',
    maxWeight: IDENTITY_BATCH_MAX_OPERATIONS,
    weight: (job) => job.operations.length,
    joins: () => true,
    objects: (job) => job.operations.length,
    commit: (db, fresh) => applyIdentityTransaction(db, fresh.map((f) => ({ key: f.key, job: f.entry.data })), occurrenceRecency(deps.clickhouse, db)),
    deliver: (_owed, outboxes) => deliverToClickHouse(deps, outboxes, []),
  }, deps.readsFirst)
  return {
    ...processor,
    async apply(batch) {
      await waitForEarlierTrackWork(deps.producer.queues, Math.max(...batch.map((b) => b.data.acceptedAt)))
      return processor.apply(batch)
    },
  }
}
