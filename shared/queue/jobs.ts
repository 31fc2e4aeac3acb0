import type { JobsOptions } from 'bullmq'
import type { z } from 'zod'
import { CallbackJob } from '../../workers/callback/schema.js'
import { ExportJob } from '../../workers/export/schema.js'
import { IdentityJob } from '../../workers/identity/schema.js'
import { TrackJob } from '../../workers/track/schema.js'
import { ApiError } from '../errors.js'
import { QueueNames, type QueueRegistry, type WorkerRole, isOrderedQueue } from './queues.js'
import type { RequestTracker } from './request-tracker.js'

/** One job type per queue; the payload schema is shared by producer and consumer. */
export const JobPayloads = {
  applyTrackBatch: TrackJob,
  applyIdentityChange: IdentityJob,
  runExport: ExportJob,
  deliverCallback: CallbackJob,
} as const

export type JobName = keyof typeof JobPayloads
export type JobOf<N extends JobName> = z.infer<(typeof JobPayloads)[N]>

export const JobRoles: Record<JobName, WorkerRole> = {
  applyTrackBatch: 'track',
  applyIdentityChange: 'identity',
  runExport: 'export',
  deliverCallback: 'callback',
}

export type QueuedJob = {
  [N in JobName]: { name: N; data: JobOf<N>; partition?: number; opts?: JobsOptions }
}[JobName]

export function queueOf(job: QueuedJob): string {
  const role = JobRoles[job.name]
  return role === 'track' ? QueueNames.track(job.partition ?? 0) : QueueNames[role]
}

/** Ordered queues retry inside the processor (a BullMQ retry would send the job to the back). */
function optionsFor(queue: string): JobsOptions {
  return isOrderedQueue(queue) ? { attempts: 1 } : { attempts: 8, backoff: { type: 'exponential', delay: 2000 } }
}

export interface Producer {
  queues: QueueRegistry
  tracker: RequestTracker
}

/**
 * Enqueues every job of one accepted request and records its progress entry. Awaited before the
 * API answers; when Redis is away the caller gets a 503 and nothing was accepted.
 */
export async function submitRequest(
  producer: Producer,
  req: { workspaceId: string; requestId: string; jobs: QueuedJob[]; errors?: unknown[] },
): Promise<void> {
  try {
    await producer.tracker.create(req.requestId, req.workspaceId, req.jobs.length, req.errors)
    const byQueue = new Map<string, { name: string; data: unknown; opts: JobsOptions }[]>()
    req.jobs.forEach((job, i) => {
      const queue = queueOf(job)
      const list = byQueue.get(queue) ?? []
      list.push({ name: job.name, data: job.data, opts: { ...optionsFor(queue), ...job.opts, jobId: `${req.requestId}_${i}` } })
      byQueue.set(queue, list)
    })
    await Promise.all([...byQueue].map(([queue, jobs]) => producer.queues.get(queue).addBulk(jobs)))
  } catch (e) {
    throw new ApiError(503, 'queue_unavailable', `the service cannot accept work right now (queue unavailable): ${(e as Error).message}`)
  }
}
