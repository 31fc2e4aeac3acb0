import path from 'node:path/posix'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ExportFile, ExportStatus } from '../../shared/db/repositories/export-repository.js'
import { adminRequest, CliError, seg, type Connection } from './connection.js'

/** Where the files go: only the answer of the export request says it, the status does not. */
export interface ExportDestination {
  object_prefix: string
  url?: string
}

export interface WatchOptions {
  json: boolean
  timeoutSeconds?: number
  destination?: ExportDestination
}

/** One poll as a view shows it. */
export interface Progress {
  status: ExportStatus
  /** Members of the segment when the watch began; absent for other exports or when unknown. */
  segmentSize?: number
  elapsedMs: number
}

interface View {
  show(progress: Progress): void
  /** Leaves the output ready for whatever is printed next. */
  stop(): void
}

const POLL_MS = 500
const BAR_WIDTH = 30
/** Exit code of a watch that gave up while the export still runs, apart from 1 for a failed export. */
const TIMED_OUT = 2

/**
 * Follows an export until it is done or failed: a progress bar on a terminal, a line per change
 * when the output is a file or pipe, one JSON status per change with --json. Throws a CliError
 * (exit 1) when the export failed and (exit 2) when --timeout passes first.
 */
export async function watchExport(conn: Connection, workspaceId: string, exportId: string, opts: WatchOptions): Promise<void> {
  const view = opts.json ? ndjsonView() : process.stdout.isTTY ? terminalView() : lineView()
  const startedAt = Date.now()
  let status = await exportStatus(conn, workspaceId, exportId)
  // JSON output is the server's status as is, so only people need the segment's size.
  const segmentSize = opts.json ? undefined : await segmentSizeOf(conn, workspaceId, status)
  for (;;) {
    const elapsedMs = Date.now() - startedAt
    view.show({ status, segmentSize, elapsedMs })
    if (status.status === 'done' || status.status === 'failed') break
    if (opts.timeoutSeconds !== undefined && elapsedMs >= opts.timeoutSeconds * 1000) {
      view.stop()
      throw new CliError(`export ${exportId} is still ${status.status} after ${opts.timeoutSeconds} s`, [], TIMED_OUT)
    }
    await sleep(POLL_MS)
    status = await exportStatus(conn, workspaceId, exportId)
  }
  view.stop()
  if (status.status === 'failed') throw new CliError(`export ${exportId} failed: ${status.error ?? 'no reason given'}`)
  if (!opts.json) console.log(summary(status, opts.destination).join('\n'))
}

async function exportStatus(conn: Connection, workspaceId: string, exportId: string): Promise<ExportStatus> {
  return (await adminRequest(conn, 'GET', `/workspaces/${seg(workspaceId)}/exports/${seg(exportId)}`)) as ExportStatus
}

/** Asked once: the count is a query over every profile, too dear to repeat every half second. */
async function segmentSizeOf(conn: Connection, workspaceId: string, status: ExportStatus): Promise<number | undefined> {
  if (!status.segment_id) return undefined
  try {
    const segment = (await adminRequest(conn, 'GET', `/workspaces/${seg(workspaceId)}/segments/${seg(status.segment_id)}`)) as { size?: number | null }
    return segment.size ?? undefined
  } catch (e) {
    // A segment deleted meanwhile fails the export, which the watch reports; the bar just lacks a total.
    if (e instanceof CliError) return undefined
    throw e
  }
}

function ndjsonView(): View {
  let last = ''
  return {
    show({ status }) {
      const line = JSON.stringify(status)
      if (line !== last) console.log(line)
      last = line
    },
    stop() {},
  }
}

/** One line redrawn in place; redrawn on every poll so that the elapsed time moves. */
function terminalView(): View {
  let drawn = false
  return {
    show(progress) {
      process.stdout.write(`\r${progressLine(progress)}\x1b[K`)
      drawn = true
    },
    stop() {
      if (drawn) process.stdout.write('\n')
      drawn = false
    },
  }
}

/** For logs and pipes, where a redrawn line would pile up: a line when something moved. */
function lineView(): View {
  let last = ''
  return {
    show(progress) {
      const line = `${progress.status.status}: ${counts(progress)}`
      if (line !== last) console.log(line)
      last = line
    },
    stop() {},
  }
}

/** `[#########.....................]  30%  3,000 of 10,000 users, 1 file  running  4s` */
export function progressLine(progress: Progress): string {
  const share = shareDone(progress)
  const bar = share === undefined ? '' : `[${'#'.repeat(Math.round(share * BAR_WIDTH)).padEnd(BAR_WIDTH, '.')}] ${`${Math.floor(share * 100)}%`.padStart(4)}  `
  return `${bar}${counts(progress)}  ${progress.status.status}  ${Math.floor(progress.elapsedMs / 1000)}s`
}

/** Of the segment's size, capped: members who joined since the size was counted may be exported too. */
function shareDone({ status, segmentSize }: Progress): number | undefined {
  if (status.status === 'done') return 1
  if (!segmentSize) return undefined
  return Math.min(1, status.users_exported / segmentSize)
}

function counts({ status, segmentSize }: Progress): string {
  const users = segmentSize ? `${number(status.users_exported)} of ${number(segmentSize)} users` : `${number(status.users_exported)} users`
  return `${users}, ${plural(status.files.length, 'file')}`
}

/** What a finished export made: its files, then where they are. */
export function summary(status: ExportStatus, destination: ExportDestination | undefined): string[] {
  return [
    `export ${status.id} done: ${plural(status.users_exported, 'user')} in ${plural(status.files.length, 'file')}`,
    ...fileTable(status.files),
    ...whereTheFilesAre(status.files, destination),
  ]
}

function fileTable(files: ExportFile[]): string[] {
  const rows = files.map((f) => [f.name, plural(f.users, 'user'), plural(f.bytes, 'byte'), f.key ?? ''])
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length)))
  return rows.map(([name, users, bytes, key]) => `  ${name.padEnd(widths[0])}  ${users.padStart(widths[1])}  ${bytes.padStart(widths[2])}  ${key}`.trimEnd())
}

function whereTheFilesAre(files: ExportFile[], destination: ExportDestination | undefined): string[] {
  if (destination) {
    return [`object prefix: ${destination.object_prefix}`, ...(destination.url ? [`download URL: ${destination.url}`] : [])]
  }
  // A file's key is the object prefix and its name; files kept by the service have no key.
  const key = files.find((f) => f.key)?.key
  if (key) return [`object prefix: ${path.dirname(key)}`]
  return ['the export status does not carry the download URL or object prefix: the answer of the export request holds them (`export start` prints it)']
}

function number(n: number): string {
  return n.toLocaleString('en-US')
}

function plural(n: number, noun: string): string {
  return `${number(n)} ${noun}${n === 1 ? '' : 's'}`
}
