import type { EventRow } from '../../shared/clickhouse/event-repository.js'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import { applyExactlyOnce } from '../../shared/domain/exactly-once.js'
import { RetryableError } from '../../shared/errors.js'
import type { WorkerDeps } from '../deps.js'
import { ok, type Processor } from '../runner.js'
import { applyTrackBatch } from './apply-batch.js'
import type { TrackJob } from './schema.js'

/** ClickHouse rows of the job's occurrences, owned by the profiles resolved when the job committed. */
export function eventRowsOf(job: TrackJob, outbox: Outbox): EventRow[] {
  const owners = outbox.eventOwners ?? []
  const rows: EventRow[] = []
  const occurrences = [
    ...job.events.map((e) => ({ ...e, kind: 'event' as const, label: e.name, currency: '', price: 0, quantity: 0 })),
    ...job.purchases.map((p) => ({ ...p, kind: 'purchase' as const, label: p.product_id })),
  ]
  occurrences.forEach((o, i) => {
    const owner = owners[i]
    if (owner === null || owner === undefined) return
    rows.push({
      workspace_id: job.workspaceId,
      profile_id: owner,
      event_id: o.eventId,
      kind: o.kind,
      name: o.label,
      app_id: o.app_id ?? '',
      time: o.time,
      properties: JSON.stringify(o.properties),
      currency: o.currency,
      price: o.price,
      quantity: o.quantity,
    })
  })
  return rows
}

/** applyTrackBatch: one partition's share of a /users/track (or subscription) request, exactly once. */
export function createTrackProcessor(deps: WorkerDeps): Processor<'applyTrackBatch'> {
  return async (job, bullJob) => {
    let errors: unknown[] = []
    await applyExactlyOnce(
      deps,
      { key: `track:${bullJob.id}`, workspaceId: job.workspaceId },
      async (db) => {
        try {
          return await applyTrackBatch(db, job, new Date().toISOString())
        } catch (e) {
          // Two partitions creating the same profile at once: the retry finds the winner's row.
          if ((e as { code?: string }).code === '23505') throw new RetryableError('concurrent profile creation', e)
          throw e
        }
      },
      (outbox) => {
        errors = outbox.errors ?? []
        return eventRowsOf(job, outbox)
      },
    )
    const objects = job.attributes.length + job.events.length + job.purchases.length
    return ok(objects, errors)
  }
}
