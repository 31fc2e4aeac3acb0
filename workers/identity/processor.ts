import type pg from 'pg'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import { applyExactlyOnce } from '../../shared/domain/exactly-once.js'
import { RetryableError } from '../../shared/errors.js'
import type { WorkerDeps } from '../deps.js'
import { ok, type Processor } from '../runner.js'
import { waitForEarlierTrackWork } from './barrier.js'
import { applyDelete } from './delete.js'
import { applyIdentify } from './identify.js'
import { applyMerge } from './merge.js'
import type { IdentityJob } from './schema.js'

/** Applies one identity operation inside the caller's transaction; returns what ClickHouse still needs. */
export async function applyIdentityOperation(db: pg.PoolClient, job: IdentityJob): Promise<Outbox> {
  const op = job.operation
  try {
    switch (op.type) {
      case 'merge':
        return await applyMerge(db, job.workspaceId, op)
      case 'identify':
        return await applyIdentify(db, job.workspaceId, op)
      case 'delete':
        return await applyDelete(db, job.workspaceId, op)
    }
  } catch (e) {
    // A track job created a profile with the external id being given out: the retry finds it and merges.
    if ((e as { code?: string }).code === '23505') throw new RetryableError('concurrent profile creation', e)
    throw e
  }
}

/**
 * applyIdentityChange: waits for track work accepted earlier (see barrier.ts), then applies the
 * operation exactly once. Problems with the named users (nobody, several, the same user twice)
 * are non-fatal errors on the request; the job itself succeeds.
 */
export function createIdentityProcessor(deps: WorkerDeps): Processor<'applyIdentityChange'> {
  return async (job, bullJob) => {
    await waitForEarlierTrackWork(deps.producer.queues, job.acceptedAt)
    let errors: unknown[] = []
    await applyExactlyOnce(
      deps,
      { key: `identity:${bullJob.id}`, workspaceId: job.workspaceId },
      (db) => applyIdentityOperation(db, job),
      (outbox) => {
        errors = outbox.errors ?? []
        return []
      },
    )
    return ok(1, errors)
  }
}
