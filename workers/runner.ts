import { setTimeout as sleep } from 'node:timers/promises'
import { Worker, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { isRetryable } from '../shared/errors.js'
import type { Logger } from '../shared/logger.js'
import { JobPayloads, type JobName, type JobOf } from '../shared/queue/jobs.js'
import { isOrderedQueue, type QueueRegistry } from '../shared/queue/queues.js'
import type { RequestTracker } from '../shared/queue/request-tracker.js'

/** What a processor expects can happen. Only failures a retry can fix are thrown. */
export type Outcome =
  | { status: 'ok'; applied?: number; errors?: unknown[] }
  | { status: 'skip'; reason: string }
  | { status: 'fail'; reason: string; errors?: unknown[] }

export const ok = (applied?: number, errors?: unknown[]): Outcome => ({ status: 'ok', applied, errors })
export const skip = (reason: string): Outcome => ({ status: 'skip', reason })
export const fail = (reason: string, errors?: unknown[]): Outcome => ({ status: 'fail', reason, errors })

export type Processor<N extends JobName> = (data: JobOf<N>, job: Job) => Promise<Outcome>

export interface RunnerOptions<N extends JobName> {
  queue: string
  jobName: N
  processor: Processor<N>
  connection: Redis
  queues: QueueRegistry
  concurrency: number
  lockMs: number
  logger: Logger
  tracker: RequestTracker
  onOutcome?: (queue: string, outcome: Outcome, seconds: number) => void
}

const MAX_BACKOFF_MS = 10_000

/**
 * Runs one queue. Ordered queues (track partitions, identity) take one job at a time across every
 * process (BullMQ global concurrency 1) and retry retryable failures in place, so a retry never
 * lets a later job for the same user overtake. A process killed mid-job leaves the job locked;
 * once the lock expires BullMQ puts it back at the head of its queue.
 */
export async function startQueueWorker<N extends JobName>(opts: RunnerOptions<N>): Promise<Worker> {
  const ordered = isOrderedQueue(opts.queue)
  const log = opts.logger.child({ queue: opts.queue })
  let closing = false

  const run = async (job: Job) => {
    const data = JobPayloads[opts.jobName].parse(job.data) as JobOf<N>
    const { requestId } = data as { requestId: string }
    const jobLog = log.child({ jobId: job.id, requestId })
    await opts.tracker.markStarted(requestId)
    const started = process.hrtime.bigint()
    let backoff = 200
    for (;;) {
      try {
        const outcome = await opts.processor(data, job)
        const seconds = Number(process.hrtime.bigint() - started) / 1e9
        opts.onOutcome?.(opts.queue, outcome, seconds)
        if (outcome.status === 'fail') {
          jobLog.warn({ reason: outcome.reason }, 'job failed')
          await opts.tracker.markJobFailed(requestId, job.id!, outcome.errors ?? [{ message: outcome.reason }])
        } else {
          // Info, like the API's request line: the two together trace a request from HTTP to storage.
          jobLog.info({ outcome: outcome.status, seconds }, 'job finished')
          await opts.tracker.markJobDone(requestId, job.id!, outcome.status === 'ok' ? outcome.errors : undefined)
        }
        return outcome.status
      } catch (e) {
        if (ordered && isRetryable(e)) {
          // Keep the partition's place: retry here, even while shutting down (the lock hands it back if we exit).
          jobLog.warn({ err: (e as Error).message, backoff, closing }, 'retryable failure; retrying in place')
          await sleep(backoff)
          backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
          continue
        }
        const attempts = job.opts.attempts ?? 1
        const last = !isRetryable(e) || job.attemptsMade + 1 >= attempts
        jobLog.error({ err: e, last }, 'job error')
        if (last) {
          opts.onOutcome?.(opts.queue, { status: 'fail', reason: (e as Error).message }, 0)
          await opts.tracker.markJobFailed(requestId, job.id!, [{ message: 'internal error while applying this request' }])
        }
        throw e
      }
    }
  }

  const worker = new Worker(opts.queue, run, {
    connection: opts.connection,
    prefix: opts.queues.prefix,
    concurrency: ordered ? 1 : opts.concurrency,
    lockDuration: opts.lockMs,
    stalledInterval: Math.max(1000, Math.floor(opts.lockMs / 2)),
    maxStalledCount: 1_000,
    autorun: false,
  })
  worker.on('error', (e) => {
    if (!closing) log.warn({ err: e.message }, 'worker connection error')
  })
  if (ordered) await opts.queues.get(opts.queue).setGlobalConcurrency(1)
  worker.run().catch((e) => log.error({ err: e }, 'worker stopped'))
  const close = worker.close.bind(worker)
  worker.close = async (force?: boolean) => {
    closing = true
    return close(force)
  }
  return worker
}
