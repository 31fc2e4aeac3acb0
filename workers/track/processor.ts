import type { EventRow } from '../../shared/clickhouse/event-repository.js'
import { applyBatchExactlyOnce } from '../../shared/domain/exactly-once.js'
import type { WorkerDeps } from '../deps.js'
import { ok, type BatchProcessor } from '../runner.js'
import { applyTrackJobs, isPlainTrackJob, type KeyedTrackJob } from './apply-batch.js'
import { eventIdOf, type TrackJob } from '../../shared/queue/track-jobs.js'

export const objectsOf = (job: TrackJob) =>
  job.attributes.length + job.events.length + job.purchases.length + job.subscriptionChanges.length + job.emailStateChanges.length

/** ClickHouse rows of a job's occurrences, owned by the profiles resolved when the job committed (a hot loop: no spreads). */
export function eventRowsOf(job: TrackJob, owners: (number | null)[]): EventRow[] {
  const rows: EventRow[] = []
  let i = 0
  for (const e of job.events) {
    const owner = owners[i++]
    if (owner === null || owner === undefined) continue
    rows.push({
      workspace_id: job.workspaceId,
      profile_id: owner,
      event_id: eventIdOf(job.requestId, 'event', e.index),
      kind: 'event',
      name: e.name,
      app_id: e.app_id ?? '',
      time: e.time,
      properties: JSON.stringify(e.properties),
      currency: '',
      price: 0,
      quantity: 0,
    })
  }
  for (const p of job.purchases) {
    const owner = owners[i++]
    if (owner === null || owner === undefined) continue
    rows.push({
      workspace_id: job.workspaceId,
      profile_id: owner,
      event_id: eventIdOf(job.requestId, 'purchase', p.index),
      kind: 'purchase',
      name: p.product_id,
      app_id: p.app_id ?? '',
      time: p.time,
      properties: JSON.stringify(p.properties),
      currency: p.currency,
      price: p.price,
      quantity: p.quantity,
    })
  }
  return rows
}

/**
 * applyTrackBatch: the waiting jobs of one partition (shares of /users/track and subscription
 * requests), applied together exactly once. Plain jobs share a batch up to config TRACK_BATCH_MAX_OBJECTS;
 * a job with push tokens or subscription states runs alone (see isPlainTrackJob).
 */
export function createTrackProcessor(deps: WorkerDeps): BatchProcessor<'applyTrackBatch'> {
  return {
    maxWeight: deps.config.TRACK_BATCH_MAX_OBJECTS,
    weight: objectsOf,
    joins: isPlainTrackJob,
    async apply(batch) {
      const members = batch.map((b) => ({ key: `track:${b.id}`, workspaceId: b.data.workspaceId, job: b.data }))
      const errors = await applyBatchExactlyOnce(
        deps,
        members,
        async (db, fresh: (KeyedTrackJob & { workspaceId: string })[]) => {
          const applied = await applyTrackJobs(db, fresh, new Date().toISOString())
          const profiles = [
            ...applied.reread,
            ...groupByWorkspace(applied.snapshots.map((s) => ({ workspaceId: s.workspace_id, id: s.profile_id }))),
          ]
          return {
            outbox: { owners: Object.fromEntries(applied.owners), profiles, deleted: applied.deleted },
            errors: applied.errors,
            snapshots: applied.snapshots,
            // A temporary push-import profile cleaned up: its rows, if any, are erased like a deleted user's.
            erased: applied.deleted.map((d) => ({ workspaceId: d.workspaceId, profileIds: d.profiles.map((p) => p.id) })),
          }
        },
        (m, owners) => eventRowsOf(m.job, owners),
      )
      return members.map((m) => ok(objectsOf(m.job), errors.get(m.key)))
    },
  }
}

function groupByWorkspace(items: { workspaceId: string; id: number }[]): { workspaceId: string; profileIds: number[] }[] {
  const by = new Map<string, number[]>()
  for (const i of items) {
    const ids = by.get(i.workspaceId) ?? []
    ids.push(i.id)
    by.set(i.workspaceId, ids)
  }
  return [...by].map(([workspaceId, profileIds]) => ({ workspaceId, profileIds }))
}
