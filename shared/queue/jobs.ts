import type { JobsOptions } from 'bullmq'
import type { z } from 'zod'
import { RetryableError } from '../errors.js'
import { QueueNames, Queues, WorkerRoles, type QueueRegistry, type WorkerRole, isOrderedQueue } from './queues.js'
import { LAYOUT_CHANGED, type BacklogBound, type BacklogRefusal, type JobShare, type RequestTracker } from './request-tracker.js'
import { trackQueueOf, type TrackLayout } from './track-layout.js'

type QueueRow = (typeof Queues)[WorkerRole]
export type JobName = QueueRow['job']

/** One job type per queue (shared/queue/queues.ts); the payload schema is shared by producer and consumer. */
export const JobPayloads = Object.fromEntries(WorkerRoles.map((r) => [Queues[r].job, Queues[r].payload])) as {
  [N in JobName]: Extract<QueueRow, { job: N }>['payload']
}
export type JobOf<N extends JobName> = z.infer<(typeof JobPayloads)[N]>

/** The worker role whose queue carries each job. */
export const JobRoles = Object.fromEntries(WorkerRoles.map((r) => [Queues[r].job, r])) as Record<JobName, WorkerRole>

export type QueuedJob = {
  [N in JobName]: { name: N; data: JobOf<N>; partition?: number; opts?: JobsOptions }
}[JobName]

/** The queue a job goes to; a track job to its partition of the layout generation it was routed for. */
export function queueOf(job: QueuedJob, generation: number): string {
  const role = JobRoles[job.name]
  return role === 'track' ? trackQueueOf(generation, job.partition ?? 0) : QueueNames[role]
}

/** Ordered queues retry inside the processor (Queues); the others through BullMQ, with backoff. */
function optionsFor(queue: string): JobsOptions {
  return isOrderedQueue(queue) ? { attempts: 1 } : { attempts: 8, backoff: { type: 'exponential', delay: 2000 } }
}

export interface Producer {
  queues: QueueRegistry
  tracker: RequestTracker
}

/** A request's jobs: as they are, or routed for the track layout in force (track work splits by partition). */
export type RequestJobs = QueuedJob[] | ((layout: TrackLayout) => QueuedJob[])

/** Routings tried before giving up: each retry follows a layout change made while the request was routed. */
const MAX_ROUTINGS = 5

/** Objects a job adds to the track backlog: everything a track partition job will apply. */
export function backlogObjects(job: QueuedJob): number {
  if (job.name !== 'applyTrackBatch') return 0
  const d = job.data
  return d.attributes.length + d.events.length + d.purchases.length + d.subscriptionChanges.length + d.emailStateChanges.length
}

/** A refusal because the track backlog is full: nothing was enqueued; retrying after `retryAfterSeconds` may fit. */
export class BacklogFullError extends Error {
  constructor(readonly refusal: BacklogRefusal, readonly retryAfterSeconds: number) {
    super(`track backlog full (${refusal.scope}): ${refusal.objects} objects of ${refusal.limit}`)
  }
}

/** Redis is away: nothing of the request was accepted, and a later attempt may succeed. */
export class QueueUnavailableError extends RetryableError {
  constructor(cause: unknown) {
    super(`queue unavailable: ${(cause as Error).message}`, cause)
  }
}

/** Objects the workers surely apply a second, even before batching: a cautious drain rate for Retry-After. */
const CAUTIOUS_APPLY_RATE = 4000

/**
 * Enqueues every job of one accepted request and records its progress entry. Awaited before the
 * API answers; when Redis is away it throws QueueUnavailableError and nothing was accepted. Track jobs count
 * toward the backlog; with `backlogBound` the request is refused (BacklogFullError, nothing
 * enqueued) when it would not fit.
 */
export async function submitRequest(
  producer: Producer,
  req: { workspaceId: string; requestId: string; jobs: RequestJobs; errors?: unknown[]; backlogBound?: BacklogBound },
): Promise<void> {
  const jobKey = (i: number) => `${req.requestId}_${i}`
  const layouts = producer.queues.layouts
  let jobs: QueuedJob[] = []
  let generation = 0
  let shares: JobShare[] = []
  let refusal: BacklogRefusal | typeof LAYOUT_CHANGED | undefined = LAYOUT_CHANGED
  for (let routing = 0; refusal === LAYOUT_CHANGED; routing++) {
    if (routing === MAX_ROUTINGS) throw new QueueUnavailableError(new Error('the track layout kept changing while the request was routed'))
    const layout = routing === 0 ? layouts.current() : await layouts.refresh().catch((e) => Promise.reject(new QueueUnavailableError(e)))
    jobs = typeof req.jobs === 'function' ? req.jobs(layout) : req.jobs
    generation = layout.generation
    shares = jobs.map((job, i) => ({ jobKey: jobKey(i), objects: backlogObjects(job) })).filter((s) => s.objects > 0)
    const routed = jobs.some((j) => JobRoles[j.name] === 'track')
    try {
      refusal = await producer.tracker.create({
        requestId: req.requestId,
        workspaceId: req.workspaceId,
        totalJobs: jobs.length,
        errors: req.errors,
        shares,
        bound: req.backlogBound,
        generation: routed ? generation : undefined,
      })
    } catch (e) {
      throw new QueueUnavailableError(e)
    }
  }
  if (refusal) {
    const excess = refusal.objects + shares.reduce((n, s) => n + s.objects, 0) - refusal.limit
    throw new BacklogFullError(refusal, Math.min(60, Math.max(1, Math.ceil(excess / CAUTIOUS_APPLY_RATE))))
  }
  try {
    // A request makes at most one job per queue (a track request one per partition): `add` sends one
    // command, where `addBulk` builds a pipeline that copies BullMQ's ~40 scripts.
    await Promise.all(
      jobs.map((job, i) => {
        const queue = queueOf(job, generation)
        return producer.queues.get(queue).add(job.name, job.data, { ...optionsFor(queue), ...job.opts, jobId: jobKey(i) })
      }),
    )
  } catch (e) {
    // Gives back every unreported share, also of a job that did reach a queue (its report then gives
    // nothing back): the backlog undercounts for a moment, never leaks.
    if (shares.length) await producer.tracker.release(req.requestId).catch(() => {})
    throw new QueueUnavailableError(e)
  }
}
