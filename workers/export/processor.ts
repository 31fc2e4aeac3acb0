import type { Job } from 'bullmq'
import { readEventSummaries } from '../../shared/clickhouse/event-repository.js'
import { compileFor, readSegmentPage } from '../../shared/clickhouse/segment-repository.js'
import {
  failExport,
  finishExport,
  loadExportRun,
  recordExportFile,
  startExportRun,
  type ExportRun,
} from '../../shared/db/repositories/export-repository.js'
import { getSegment } from '../../shared/db/repositories/segment-repository.js'
import { getWorkspace } from '../../shared/db/repositories/workspace-repository.js'
import type { Filter } from '../../shared/domain/segment-filter.js'
import { filterLimitProblem } from '../../shared/domain/segment-limits.js'
import { globalControlGroupFilter } from '../../shared/domain/segment-sql.js'
import { needsSummaries } from '../../shared/domain/user-record.js'
import { isRetryable } from '../../shared/errors.js'
import { submitRequest } from '../../shared/queue/jobs.js'
import { exportFileName, jsonEntryName } from '../../shared/storage/export-layout.js'
import { StorageRefusedError } from '../../shared/storage/s3-uploader.js'
import type { WorkerDeps } from '../deps.js'
import { fail, ok, skip, type Outcome, type Processor } from '../runner.js'
import { bucketTarget, localTarget, type ExportTarget } from './export-target.js'
import { writeExportFile } from './file-writer.js'
import { MemberPages } from './member-pages.js'
import { projectionOf, recordLines, type ExportMember } from './record-lines.js'

/** Rows fetched from ClickHouse per query; a file of more users spans several pages. */
const PAGE_SIZE = 5000

/** An export that cannot run for a reason a retry will not change. */
class ExportRefused extends Error {}

/**
 * Runs one export: pages the segment's members out of ClickHouse, writes files of at most
 * EXPORT_USERS_PER_FILE users, hands each to its target and records progress in the row. A
 * refusal by the bucket or a missing segment is a failed export with its reason; a lost
 * connection is retried by BullMQ, and the run then starts over under the same file names.
 */
export function createExportProcessor(deps: WorkerDeps): Processor<'runExport'> {
  return async (data, job) => {
    const run = await loadExportRun(deps.pg, data.exportId)
    if (!run) return skip(`export ${data.exportId} no longer exists`)
    if (run.status === 'failed') return skip('the export already failed')
    if (run.status === 'done') {
      // A retry after the files were done but before the callback was queued.
      await enqueueCallback(deps, run)
      return skip('the export is already done')
    }
    try {
      const users = await runExport(deps, run)
      await finishExport(deps.pg, run.id)
      await enqueueCallback(deps, run)
      return ok(users)
    } catch (e) {
      return failedRun(deps, run, e, job)
    }
  }
}

async function runExport(deps: WorkerDeps, run: ExportRun): Promise<number> {
  const filter = await membership(deps, run)
  const target = await targetOf(deps, run)
  await startExportRun(deps.pg, run.id)
  const compiled = compileFor(deps.clickhouse, filter)
  const now = new Date()
  const summariesWanted = needsSummaries(projectionOf(run, now))
  const members = new MemberPages(
    (after, limit) => readSegmentPage(deps.clickhouse, run.workspace_id, compiled, { after, limit }),
    async (page): Promise<ExportMember[]> => {
      const summaries = summariesWanted ? await readEventSummaries(deps.clickhouse, run.workspace_id, page.map((m) => Number(m.profile_id))) : new Map()
      return page.map((m) => ({ ...m, summaries: summaries.get(Number(m.profile_id)) ?? [] }))
    },
    Math.min(PAGE_SIZE, deps.config.EXPORT_USERS_PER_FILE),
  )
  const lines = recordLines(run, now)
  let exported = 0
  try {
    for (let index = 0; await members.hasMore(); index++) {
      const name = exportFileName(index, target.format)
      const counted = lines(members.take(deps.config.EXPORT_USERS_PER_FILE))
      const bytes = await writeExportFile(target.pathFor(name), target.format, jsonEntryName(name), counted.lines)
      const key = await target.deliver(name, target.pathFor(name))
      await recordExportFile(deps.pg, run.id, { name, users: counted.users(), bytes, ...(key ? { key } : {}) })
      deps.metrics.exportRows.inc(counted.users())
      deps.metrics.exportBytes.inc(bytes)
      exported += counted.users()
    }
  } finally {
    await target.close()
  }
  return exported
}

/** The filter that decides membership, read when the run starts (the segment may have changed). */
async function membership(deps: WorkerDeps, run: ExportRun): Promise<Filter> {
  if (run.kind === 'global_control_group') {
    const ws = await getWorkspace(deps.pg, run.workspace_id)
    if (!ws) throw new ExportRefused('the workspace no longer exists')
    return globalControlGroupFilter(ws.global_control_percent)
  }
  const segment = await getSegment(deps.pg, run.workspace_id, run.segment_id!)
  if (!segment) throw new ExportRefused(`segment ${run.segment_id} no longer exists`)
  const overLimit = filterLimitProblem(segment.filter as Filter)
  if (overLimit) throw new ExportRefused(`segment ${segment.id} cannot be exported: its filter ${overLimit}`)
  return segment.filter as Filter
}

async function targetOf(deps: WorkerDeps, run: ExportRun): Promise<ExportTarget> {
  if (run.request.destination === 'local') return localTarget(deps.config.DATA_DIR, run)
  const ws = await getWorkspace(deps.pg, run.workspace_id)
  if (!ws?.export_storage) throw new ExportRefused('the workspace export storage was removed after the export was requested')
  return bucketTarget(deps.config.DATA_DIR, run, ws.export_storage)
}

/** Retryable failures are thrown while attempts remain; every other failure ends the export. */
async function failedRun(deps: WorkerDeps, run: ExportRun, e: unknown, job: Job): Promise<Outcome> {
  const expected = e instanceof StorageRefusedError || e instanceof ExportRefused
  const attemptsLeft = job.attemptsMade + 1 < (job.opts.attempts ?? 1)
  if (!expected && isRetryable(e) && attemptsLeft) throw e
  // The operator and the API user see the reason: an unexpected failure's own text (an engine's
  // message, a stack) stays in the log, found by the export id.
  const reason = expected ? (e as Error).message : `export failed: an internal error, logged with export id ${run.id}`
  if (!expected) deps.logger.error({ err: e, exportId: run.id }, 'export failed')
  await failExport(deps.pg, run.id, reason)
  return fail(reason)
}

/** When the request named a callback endpoint, one POST announces the finished export. */
async function enqueueCallback(deps: WorkerDeps, run: ExportRun): Promise<void> {
  const endpoint = run.request.callback_endpoint
  if (!endpoint) return
  const requestId = `${run.id}-callback`
  const body = { success: true, ...(run.url ? { url: run.url } : {}) }
  // Redis away is a QueueUnavailableError, retryable: the job id is fixed, so queueing again on the
  // retry cannot send the callback twice.
  await submitRequest(deps.producer, {
    workspaceId: run.workspace_id,
    requestId,
    jobs: [{ name: 'deliverCallback', data: { workspaceId: run.workspace_id, requestId, exportId: run.id, url: endpoint, body } }],
  })
}
