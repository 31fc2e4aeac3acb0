import type { Worker } from 'bullmq'
import type { Context } from '../shared/context.js'
import type { JobName } from '../shared/queue/jobs.js'
import { QueueNames, Queues, queueNamesFor, type WorkerRole } from '../shared/queue/queues.js'
import { queueFamily, type Metrics } from '../shared/metrics.js'
import { createCallbackProcessor } from './callback/processor.js'
import { ReadPriority } from './clickhouse-reads/priority.js'
import { serveClickHouseReadsInThread } from './clickhouse-reads/in-thread.js'
import type { WorkerDeps } from './deps.js'
import { startExpiredFilesSweeper } from './export/expired-files.js'
import { createExportProcessor } from './export/processor.js'
import { createIdentityProcessor } from './identity/processor.js'
import { startHistorySweeper } from './identity/sweep.js'
import { startLedgerPruner } from './ledger-prune.js'
import { startQueueWorker, type BatchProcessor, type Processor } from './runner.js'
import { createTrackProcessor } from './track/processor.js'

/** Every job name has exactly one processor; a missing one fails the build, not a run. */
const processors: { [N in JobName]: (deps: WorkerDeps) => Processor<N> | BatchProcessor<N> } = {
  applyTrackBatch: createTrackProcessor,
  applyIdentityChange: createIdentityProcessor,
  runExport: createExportProcessor,
  deliverCallback: createCallbackProcessor,
}


/** Starts the workers of the given roles in this process. */
export async function startWorkers(ctx: Context, roles: WorkerRole[], metrics: Metrics): Promise<Worker[]> {
  if (!ctx.clickhouse) throw new Error('workers need ClickHouse')
  const readPriority = new ReadPriority()
  const deps: WorkerDeps = {
    config: ctx.config,
    logger: ctx.logger,
    pg: ctx.pg,
    clickhouse: ctx.clickhouse,
    producer: { queues: ctx.queues, tracker: ctx.tracker },
    metrics,
    readsFirst: () => readPriority.yield(),
  }
  const connection = ctx.workerRedis()
  const workers: Worker[] = []
  for (const role of roles) {
    // Series exist from the start at 0, so an alert's increase() counts the first failure or stall too.
    for (const outcome of ['ok', 'skip', 'fail'] as const) metrics.jobs.inc({ queue: role, outcome }, 0)
    metrics.jobsStalled.inc({ queue: role }, 0)
    for (const status of ['done', 'failed'] as const) metrics.requestDone.zero({ queue: role, status })
    const jobName: JobName = Queues[role].job
    const processor = processors[jobName](deps) as Processor<typeof jobName> | BatchProcessor<typeof jobName>
    for (const queue of queueNamesFor(role, ctx.config.TRACK_PARTITIONS)) {
      workers.push(
        await startQueueWorker({
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
          onOutcome: (q, outcome, seconds) => {
            const family = queueFamily(q).family
            metrics.jobs.inc({ queue: family, outcome: outcome.status })
            metrics.jobDuration.observe({ queue: family }, seconds)
            if (outcome.status === 'ok' && outcome.applied) metrics.objectsApplied.inc({ queue: family }, outcome.applied)
          },
          onRequestFinished: (q, status, seconds) => metrics.requestDone.observe({ queue: queueFamily(q).family, status }, seconds),
          onStalled: (q) => metrics.jobsStalled.inc({ queue: queueFamily(q).family }),
        }),
      )
    }
  }
  if (roles.includes('identity')) {
    // The history sweep (squash merges, erase deleted users) runs beside the identity queue's worker,
    // on a connection of its own: its copies and mutations must not hold the deliveries back.
    const stopSweeper = startHistorySweeper({ ...deps, clickhouse: ctx.clickhouse.beside('history-sweep') })
    workers.find((w) => w.name === QueueNames.identity)!.once('closing', stopSweeper)
  }
  if (roles.includes('track') || roles.includes('identity')) {
    // The exactly-once ledger's writers prune it, as long as the first of their workers lives.
    const stopPruner = startLedgerPruner(deps)
    workers.find((w) => w.name === QueueNames.track(0) || w.name === QueueNames.identity)!.once('closing', stopPruner)
  }
  if (ctx.clickhouse.embedded && workers.length) {
    // Only this process may open the embedded engine: it answers the API processes' ClickHouse reads.
    const server = await serveClickHouseReadsInThread({
      data: {
        redisUrl: ctx.config.REDIS_URL,
        prefix: ctx.config.QUEUE_PREFIX,
        dataDir: ctx.clickhouse.dataDir!,
        database: ctx.clickhouse.database,
        logLevel: ctx.config.LOG_LEVEL,
      },
      priority: readPriority,
      logger: ctx.logger,
    })
    // Closing the first worker also stops the read server (its heartbeat gone), before the caller closes the engine.
    const closeFirst = workers[0].close.bind(workers[0])
    workers[0].close = async (force?: boolean) => {
      await Promise.all([server.stop(), closeFirst(force)])
    }
  }
  if (roles.includes('export')) {
    // The sweeper lives as long as the export queue's worker, which the caller closes at shutdown.
    const stopSweeper = startExpiredFilesSweeper(deps)
    workers.find((w) => w.name === QueueNames.export)!.once('closing', stopSweeper)
  }
  return workers
}
