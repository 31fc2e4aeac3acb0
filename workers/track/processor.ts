import type { EventRow } from '../../shared/clickhouse/event-repository.js'
import type { Snapshot } from '../../shared/clickhouse/snapshot-repository.js'
import { recordErasures } from '../../shared/db/repositories/override-repository.js'
import { propertiesTextOf } from '../../shared/domain/track-operations.js'
import { eventIdOf, type TrackJob } from '../../shared/queue/track-jobs.js'
import { deliverToClickHouse } from '../clickhouse-delivery.js'
import type { WorkerDeps } from '../deps.js'
import { exactlyOnce } from '../exactly-once.js'
import { occurrenceRecency } from '../occurrence-recency.js'
import type { BatchProcessor } from '../runner.js'
import { applyTrackJobs, isPlainTrackJob } from './apply-batch.js'

export const objectsOf = (job: TrackJob) =>
  job.attributes.length + job.events.length + job.purchases.length + job.subscriptionChanges.length + job.emailStateChanges.length

/**
 * ClickHouse rows of a job's occurrences, owned by the profiles resolved when the job committed,
 * made one at a time as the insert writes them: each row dies young instead of living in a list
 * until the insert (a hot loop: no spreads).
 */
export function* eventRowsOf(job: TrackJob, owners: (number | null)[]): Generator<EventRow> {
  let i = 0
  for (const e of job.events) {
    const owner = owners[i++]
    if (owner === null || owner === undefined) continue
    yield {
      workspace_id: job.workspaceId,
      profile_id: owner,
      event_id: eventIdOf(job.requestId, 'event', e.index),
      kind: 'event',
      name: e.name,
      app_id: e.app_id ?? '',
      time: e.time,
      properties: propertiesTextOf(e),
      currency: '',
      price: 0,
      quantity: 0,
    }
  }
  for (const p of job.purchases) {
    const owner = owners[i++]
    if (owner === null || owner === undefined) continue
    yield {
      workspace_id: job.workspaceId,
      profile_id: owner,
      event_id: eventIdOf(job.requestId, 'purchase', p.index),
      kind: 'purchase',
      name: p.product_id,
      app_id: p.app_id ?? '',
      time: p.time,
      properties: propertiesTextOf(p),
      currency: p.currency,
      price: p.price,
      quantity: p.quantity,
    }
  }
}

/**
 * applyTrackBatch: the waiting jobs of one partition (shares of /users/track and subscription
 * requests), applied together exactly once. Plain jobs share a batch up to config TRACK_BATCH_MAX_OBJECTS;
 * a job with push tokens or subscription states runs alone (see isPlainTrackJob).
 */
export function createTrackProcessor(deps: WorkerDeps): BatchProcessor<'applyTrackBatch'> {
  return exactlyOnce<'applyTrackBatch', Snapshot[]>(deps.pg, {
    ledgerName: 'track',
    maxWeight: deps.config.TRACK_BATCH_MAX_OBJECTS,
    weight: objectsOf,
    joins: isPlainTrackJob,
    objects: objectsOf,
    async commit(db, fresh) {
      const applied = await applyTrackJobs(db, fresh.map((f) => ({ key: f.key, job: f.entry.data })), new Date().toISOString(), occurrenceRecency(deps.clickhouse, db))
      const deleted = applied.deleted.map((d) => ({ workspaceId: d.workspaceId, profileIds: d.profiles.map((p) => p.id) }))
      // A temporary push-import profile cleaned up: its rows, if any, are erased like a deleted user's.
      await recordErasures(db, deleted)
      return {
        errors: applied.errors,
        outbox: { owners: Object.fromEntries(applied.owners), profiles: [...applied.reread, ...profilesOf(applied.snapshots)], deleted: applied.deleted },
        carry: applied.snapshots,
      }
    },
    async deliver(owed, outboxes, snapshots) {
      function* events() {
        for (const o of owed) yield* eventRowsOf(o.entry.data, o.outbox.owners[o.key] ?? [])
      }
      await deliverToClickHouse(deps, outboxes, events(), snapshots)
    },
  }, deps.readsFirst)
}

/** The profiles of snapshots, by workspace. */
function profilesOf(snapshots: Snapshot[]): { workspaceId: string; profileIds: number[] }[] {
  const by = new Map<string, number[]>()
  for (const s of snapshots) {
    const ids = by.get(s.workspace_id) ?? []
    ids.push(s.profile_id)
    by.set(s.workspace_id, ids)
  }
  return [...by].map(([workspaceId, profileIds]) => ({ workspaceId, profileIds }))
}
