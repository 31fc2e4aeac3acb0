import type { Context } from '../shared/context.js'
import type { JobName } from '../shared/queue/jobs.js'
import { QueueNames, Queues, rolesUseClickHouse, type WorkerRole } from '../shared/queue/queues.js'
import { generationOf } from '../shared/queue/track-layout.js'
import { queueFamily, type Metrics } from '../shared/metrics.js'
import { createCallbackProcessor } from './callback/processor.js'
import type { WorkerDeps } from './deps.js'
import { holdOpenEngine, type EngineSeat } from './engine/seat.js'
import { KnownWorkspaces } from './known-workspaces.js'
import { startExpiredFilesSweeper } from './export/expired-files.js'
import { createExportProcessor } from './export/processor.js'
import { createIdentityProcessor } from './identity/processor.js'
import { startHistorySweeper } from './identity/sweep.js'
import { startLedgerPruner } from './ledger-prune.js'
import { startQueueWorker, type BatchProcessor, type Processor } from './runner.js'
import { LayoutDrain } from './track/layout-drain.js'
import { startPartitionGroup } from './track/partition-group.js'
import { createTrackProcessor } from './track/processor.js'

/** A role's running workers: one queue's BullMQ worker, or the track role's partition group. */
export interface RunningWorker {
  name: string
  close(force?: boolean): Promise<void>
}

/** The seats of engines held for a context whose workers were started in several calls (tests). */
const openedSeats = new WeakMap<Context, EngineSeat>()

/** Runs `stop` when the worker starts closing (before its active jobs finish). */
function closeWith(worker: RunningWorker, stop: () => void): void {
  const close = worker.close.bind(worker)
  worker.close = (force?: boolean) => {
    stop()
    return close(force)
  }
}

/** Every job name has exactly one processor; a missing one fails the build, not a run. */
const processors: { [N in JobName]: (deps: WorkerDeps) => Processor<N> | BatchProcessor<N> } = {
  applyTrackBatch: createTrackProcessor,
  applyIdentityChange: createIdentityProcessor,
  runExport: createExportProcessor,
  deliverCallback: createCallbackProcessor,
}


/**
 * Starts the workers of the given roles in this process. `seat` is how it reaches the embedded
 * engine (workers/engine/seat.ts); without one, an embedded engine open in this process (tests) is
 * held here for the others.
 */
export async function startWorkers(ctx: Context, roles: WorkerRole[], metrics: Metrics, seat?: EngineSeat): Promise<RunningWorker[]> {
  if (rolesUseClickHouse(roles) && !ctx.clickhouse) throw new Error(`the ${roles.join(', ')} workers need ClickHouse`)
  if (!seat && ctx.clickhouse?.embedded) {
    seat = openedSeats.get(ctx) ?? (await holdOpenEngine({ config: ctx.config, logger: ctx.logger, redis: ctx.redis, clickhouse: ctx.clickhouse }))
    openedSeats.set(ctx, seat)
  }
  const deps = {
    config: ctx.config,
    logger: ctx.logger,
    pg: ctx.pg,
    // Absent only in a process whose roles use none (checked above).
    clickhouse: ctx.clickhouse!,
    producer: { queues: ctx.queues, tracker: ctx.tracker },
    metrics,
    readsFirst: seat ? () => seat.readsFirst() : () => Promise.resolve(),
  } satisfies WorkerDeps
  const connection = ctx.workerRedis()
  const workspaces = new KnownWorkspaces(ctx.pg)
  const drain = new LayoutDrain({ queues: ctx.queues, tracker: ctx.tracker, logger: ctx.logger })
  const workers: RunningWorker[] = []
  for (const role of roles) {
    // Series exist from the start at 0, so an alert's increase() counts the first failure or stall too.
    for (const outcome of ['ok', 'skip', 'fail'] as const) metrics.jobs.inc({ queue: role, outcome }, 0)
    metrics.jobsStalled.inc({ queue: role }, 0)
    for (const status of ['done', 'failed'] as const) metrics.requestDone.zero({ queue: role, status })
    const jobName: JobName = Queues[role].job
    const processor = processors[jobName](deps) as Processor<typeof jobName> | BatchProcessor<typeof jobName>
    const start = (queue: string) =>
      startQueueWorker({
        queue,
        jobName,
        processor,
        connection,
        queues: ctx.queues,
        concurrency: ctx.config.WORKER_CONCURRENCY,
        lockMs: ctx.config.JOB_LOCK_MS,
        logger: ctx.logger,
        tracker: ctx.tracker,
        // The history-changing queues yield to the API's reads; exports and callbacks are reads or wait on the network.
        yieldTo: role === 'track' || role === 'identity' ? deps.readsFirst : undefined,
        holdUntil: role === 'track' ? () => drain.mayApply(generationOf(queue)) : undefined,
        unknownWorkspaces: (ids) => workspaces.unknownOf(ids),
        onOutcome: (q, outcome, seconds) => {
          const family = queueFamily(q).family
          metrics.jobs.inc({ queue: family, outcome: outcome.status })
          metrics.jobDuration.observe({ queue: family }, seconds)
          if (outcome.status === 'ok' && outcome.applied) metrics.objectsApplied.inc({ queue: family }, outcome.applied)
        },
        onRequestFinished: (q, status, seconds) => metrics.requestDone.observe({ queue: queueFamily(q).family, status }, seconds),
        onStalled: (q) => metrics.jobsStalled.inc({ queue: queueFamily(q).family }),
      })
    if (role === 'track') {
      // Each process works its share of the partitions, dealt among the processes running track.
      const ttlMs = Math.min(5_000, Math.max(1_500, Math.floor(ctx.config.JOB_LOCK_MS / 2)))
      workers.push(await startPartitionGroup({ redis: ctx.redis, prefix: ctx.config.QUEUE_PREFIX, layouts: ctx.queues.layouts, ttlMs, start, logger: ctx.logger }))
    } else {
      workers.push(await start(QueueNames[role]))
    }
  }
  if (roles.includes('identity')) {
    // The history sweep (squash merges, erase deleted users) runs beside the identity queue's worker,
    // on a connection of its own: its copies and mutations must not hold the deliveries back.
    const stopSweeper = startHistorySweeper({ ...deps, clickhouse: deps.clickhouse.beside('history-sweep') })
    closeWith(workers.find((w) => w.name === QueueNames.identity)!, stopSweeper)
  }
  if (roles.includes('track') || roles.includes('identity')) {
    // The exactly-once ledger's writers prune it, as long as the first of their workers lives.
    const stopPruner = startLedgerPruner(deps)
    closeWith(workers.find((w) => w.name === 'track' || w.name === QueueNames.identity)!, stopPruner)
  }
  if (seat && workers.length) {
    // Closing the first worker also gives up the engine's seat (its heartbeat gone), before the caller closes the engine.
    const closeFirst = workers[0].close.bind(workers[0])
    workers[0].close = async (force?: boolean) => {
      await Promise.all([seat.close(), closeFirst(force)])
    }
  }
  if (roles.includes('export')) {
    // The sweeper lives as long as the export queue's worker, which the caller closes at shutdown.
    const stopSweeper = startExpiredFilesSweeper(deps)
    closeWith(workers.find((w) => w.name === QueueNames.export)!, stopSweeper)
  }
  return workers
}
