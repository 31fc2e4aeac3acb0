import { setTimeout as sleep } from 'node:timers/promises'
import { Worker, type Job, type Queue } from 'bullmq'
import type { Redis } from 'ioredis'
import { isRetryable } from '../shared/errors.js'
import type { Logger } from '../shared/logger.js'
import { JobPayloads, type JobName, type JobOf } from '../shared/queue/jobs.js'
import { isOrderedQueue, type QueueRegistry } from '../shared/queue/queues.js'
import { oldestWaiting, removeWaiting } from '../shared/queue/waiting-jobs.js'
import type { JobReport, RequestStatus, RequestTracker } from '../shared/queue/request-tracker.js'

/** What a processor expects can happen. Only failures a retry can fix are thrown. */
export type Outcome =
  | { status: 'ok'; applied?: number; errors?: unknown[] }
  | { status: 'skip'; reason: string }
  | { status: 'fail'; reason: string; errors?: unknown[] }

export const ok = (applied?: number, errors?: unknown[]): Outcome => ({ status: 'ok', applied, errors })
export const skip = (reason: string): Outcome => ({ status: 'skip', reason })
export const fail = (reason: string, errors?: unknown[]): Outcome => ({ status: 'fail', reason, errors })

export type Processor<N extends JobName> = (data: JobOf<N>, job: Job) => Promise<Outcome>

/** A job handed to a batch processor. */
export interface BatchEntry<N extends JobName> {
  id: string
  data: JobOf<N>
}

/** A job of a batch as the runner keeps it: also when it was added to its queue (ms), its request's acceptance. */
type Taken<N extends JobName> = BatchEntry<N> & { acceptedAt: number }

/**
 * A processor of an ordered queue that applies the jobs waiting behind the active one together.
 * Payloads are not parsed again: the API built them from requests it validated.
 */
export interface BatchProcessor<N extends JobName> {
  /** A batch's weight bound (e.g. objects); the first job always runs, whatever its weight. */
  maxWeight: number
  weight(data: JobOf<N>): number
  /** Whether a job may share a batch; one that may not runs alone. */
  joins(data: JobOf<N>): boolean
  /** Applies the jobs in order; returns each job's outcome, in the same order. */
  apply(batch: BatchEntry<N>[]): Promise<Outcome[]>
}

export interface RunnerOptions<N extends JobName> {
  queue: string
  jobName: N
  processor: Processor<N> | BatchProcessor<N>
  connection: Redis
  queues: QueueRegistry
  concurrency: number
  lockMs: number
  logger: Logger
  tracker: RequestTracker
  onOutcome?: (queue: string, outcome: Outcome, seconds: number) => void
  /** A request whose last job this worker reported, and the seconds since it was accepted. */
  onRequestFinished?: (queue: string, status: Extract<RequestStatus, 'done' | 'failed'>, seconds: number) => void
  /** A job of this queue whose lock expired (its worker died or hung) and went back to be run again. */
  onStalled?: (queue: string) => void
  /** Awaited before each batch is applied: work that must go first (the API's ClickHouse reads). */
  yieldTo?: () => Promise<void>
  /** Which workspaces of a batch this process's database does not know (their jobs fail, unapplied). */
  unknownWorkspaces?: (ids: string[]) => Promise<Set<string>>
  /** Awaited before a job is taken up: an ordering barrier it must not pass yet (a partition change's). */
  holdUntil?: () => Promise<void>
}

const MAX_BACKOFF_MS = 10_000
/** Jobs read per look at the waiting list, and at most per batch (small jobs: 512 a batch). */
const PEEK_PAGE = 128
const MAX_BATCH_JOBS = 512

const isBatchProcessor = <N extends JobName>(p: Processor<N> | BatchProcessor<N>): p is BatchProcessor<N> => typeof p !== 'function'

/**
 * The jobs waiting right behind the active one that may join its batch, oldest first. Under
 * global concurrency 1 nobody else can take them; they stay in the queue until their batch has
 * reached ClickHouse, so the applied jobs are always a prefix of the queue (a job whose worker died
 * returns to the head).
 */
async function waitingBehind<N extends JobName>(queues: QueueRegistry, queue: Queue, processor: BatchProcessor<N>, first: JobOf<N>): Promise<Taken<N>[]> {
  if (!processor.joins(first)) return []
  const taken: Taken<N>[] = []
  let weight = processor.weight(first)
  // Jobs of a backlog are alike in size: read about as many as fit (parsing payloads that do not
  // fit was a large share of the worker's time), more if they turn out smaller.
  const likelyFit = (room: number) => Math.min(PEEK_PAGE, Math.max(1, Math.ceil(room / Math.max(1, processor.weight(first)))))
  for (let start = 0; taken.length < MAX_BATCH_JOBS; ) {
    const count = likelyFit(processor.maxWeight - weight)
    const page = await oldestWaiting(queues.connection, queue, start, count)
    for (const job of page.jobs) {
      const data = JSON.parse(job.payload) as JobOf<N>
      const w = processor.weight(data)
      if (!processor.joins(data) || weight + w > processor.maxWeight || taken.length >= MAX_BATCH_JOBS) return taken
      taken.push({ id: job.id, data, acceptedAt: job.timestamp })
      weight += w
    }
    if (!page.cut && page.jobs.length < count) return taken
    start += page.jobs.length
  }
  return taken
}

/**
 * Runs one queue. Ordered queues (track partitions, identity) take one job at a time across every
 * process (BullMQ global concurrency 1) and retry retryable failures in place, so a retry never
 * lets a later job for the same user overtake; a batch processor there also takes the jobs
 * waiting behind the active one. A process killed mid-job leaves the job locked; once the lock
 * expires BullMQ puts it back at the head of its queue.
 */
export async function startQueueWorker<N extends JobName>(opts: RunnerOptions<N>): Promise<Worker> {
  const ordered = isOrderedQueue(opts.queue)
  const log = opts.logger.child({ queue: opts.queue })
  const queue = opts.queues.get(opts.queue)
  const processor = opts.processor
  let closing = false

  /** Applies a batch, retrying in place what a retry can fix; a job failing for another reason fails alone. */
  const applyBatch = async (batch: BatchEntry<N>[], job: Job): Promise<(Outcome | Error)[]> => {
    let backoff = 200
    for (;;) {
      try {
        if (isBatchProcessor(processor)) return await processor.apply(batch)
        return [await processor(batch[0].data, job)]
      } catch (e) {
        if (ordered && isRetryable(e)) {
          // Keep the partition's place: retry here, even while shutting down (the lock hands it back if we exit).
          log.warn({ err: (e as Error).message, backoff, closing, jobs: batch.length }, 'retryable failure; retrying in place')
          await sleep(backoff)
          backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
          continue
        }
        if (batch.length === 1) return [e as Error]
        log.warn({ err: (e as Error).message, jobs: batch.length }, 'batch failed; applying its jobs one at a time')
        const outcomes: (Outcome | Error)[] = []
        for (const entry of batch) outcomes.push(...(await applyBatch([entry], job)))
        return outcomes
      }
    }
  }

  /**
   * Applies the jobs of workspaces this database knows. A job of another (a deployment sharing the
   * Redis prefix by mistake) would write where its own deployment never reads: it fails, named.
   */
  const applyKnown = async (batch: BatchEntry<N>[], job: Job): Promise<(Outcome | Error)[]> => {
    const workspaceOf = (e: BatchEntry<N>) => (e.data as { workspaceId: string }).workspaceId
    const unknown = opts.unknownWorkspaces ? await step('check workspaces', () => opts.unknownWorkspaces!(batch.map(workspaceOf))) : undefined
    if (!unknown?.size) return applyBatch(batch, job)
    log.error({ workspaces: [...unknown] }, 'jobs for workspaces this database does not know: is another deployment using this QUEUE_PREFIX? failing them')
    const known = batch.filter((e) => !unknown.has(workspaceOf(e)))
    const applied = known.length ? await applyBatch(known, job) : []
    let next = 0
    return batch.map((e) => (unknown.has(workspaceOf(e)) ? fail(`workspace ${workspaceOf(e)} is not in this deployment's database`) : applied[next++]))
  }

  /**
   * The Redis steps around a batch (reading the jobs behind, progress, removal) are all safe to
   * repeat: an ordered queue retries them in place rather than fail a job it may have applied.
   */
  const step = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    let backoff = 200
    for (;;) {
      try {
        return await fn()
      } catch (e) {
        if (!ordered) throw e
        log.warn({ err: (e as Error).message, backoff, step: what }, 'queue bookkeeping failed; retrying in place')
        await sleep(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
  }

  const run = async (job: Job) => {
    await opts.holdUntil?.()
    // Before the batch is gathered: while the first job waits, the jobs behind it may still join.
    await opts.yieldTo?.()
    const first: Taken<N> = {
      id: job.id!,
      data: (isBatchProcessor(processor) ? job.data : JobPayloads[opts.jobName].parse(job.data)) as JobOf<N>,
      acceptedAt: job.timestamp,
    }
    const batch = [first, ...(ordered && isBatchProcessor(processor) ? await step('peek', () => waitingBehind(opts.queues, queue, processor, first.data)) : [])]
    const requestOf = (e: BatchEntry<N>) => (e.data as { requestId: string }).requestId
    await step('mark started', () => opts.tracker.markStartedMany([...new Set(batch.map(requestOf))]))
    const started = process.hrtime.bigint()
    const outcomes = await applyKnown(batch, job)
    const seconds = Number(process.hrtime.bigint() - started) / 1e9

    const reports: JobReport[] = []
    const reported: Taken<N>[] = []
    let firstError: Error | undefined
    batch.forEach((entry, i) => {
      const outcome = outcomes[i]
      // The job's fields on its line, not a child logger: one of those per job cost even when nothing was logged.
      const ids = { jobId: entry.id, requestId: requestOf(entry) }
      if (outcome instanceof Error) {
        // Only the active job can go to BullMQ's failed set (and, off ordered queues, be attempted again).
        const attempts = job.opts.attempts ?? 1
        const last = i > 0 || !isRetryable(outcome) || job.attemptsMade + 1 >= attempts
        log.error({ ...ids, err: outcome, last }, 'job error')
        if (last) {
          opts.onOutcome?.(opts.queue, { status: 'fail', reason: outcome.message }, seconds)
          reported.push(entry)
          reports.push({ requestId: requestOf(entry), jobKey: entry.id, status: 'failed', errors: [{ message: 'internal error while applying this request' }] })
        }
        if (i === 0) firstError = outcome
        return
      }
      opts.onOutcome?.(opts.queue, outcome, seconds)
      reported.push(entry)
      if (outcome.status === 'fail') {
        log.warn({ ...ids, reason: outcome.reason }, 'job failed')
        reports.push({ requestId: requestOf(entry), jobKey: entry.id, status: 'failed', errors: outcome.errors ?? [{ message: outcome.reason }] })
      } else {
        // Info, like the API's request line: the two together trace a request from HTTP to storage.
        log.info({ ...ids, outcome: outcome.status, seconds, batch: batch.length }, 'job finished')
        reports.push({ requestId: requestOf(entry), jobKey: entry.id, status: 'done', errors: outcome.status === 'ok' ? outcome.errors : undefined })
      }
    })
    const finished = await step('report', () => opts.tracker.reportJobs(reports))
    const now = Date.now()
    for (const f of finished) opts.onRequestFinished?.(opts.queue, f.status, Math.max(0, now - reported[f.report].acceptedAt) / 1000)
    // The jobs that joined the active one leave the queue only now that they are applied and reported.
    await step('remove', () => removeWaiting(opts.queues.connection, queue, batch.slice(1).map((e) => e.id)))
    if (firstError) throw firstError
    return (outcomes[0] as Outcome).status
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
  worker.on('stalled', (jobId) => {
    log.warn({ jobId }, 'job stalled (its lock expired): back in the queue')
    opts.onStalled?.(opts.queue)
  })
  if (ordered) await queue.setGlobalConcurrency(1)
  worker.run().catch((e) => log.error({ err: e }, 'worker stopped'))
  const close = worker.close.bind(worker)
  worker.close = async (force?: boolean) => {
    closing = true
    return close(force)
  }
  return worker
}
