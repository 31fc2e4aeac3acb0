import { mkdir, rm } from 'node:fs/promises'
import path from 'node:path'
import type { ExportRun } from '../../shared/db/repositories/export-repository.js'
import type { ExportStorage } from '../../shared/db/repositories/workspace-repository.js'
import { localExportDir, uploadScratchDir, type OutputFormat } from '../../shared/storage/export-layout.js'
import { s3Uploader } from '../../shared/storage/s3-uploader.js'

/** Where the files of one export run end up. */
export interface ExportTarget {
  /** The format files are written in. */
  format: OutputFormat
  pathFor(fileName: string): string
  /** Hands a written file over; returns its object key when it went to a bucket. */
  deliver(fileName: string, filePath: string): Promise<string | undefined>
  close(): Promise<void>
}

/**
 * The service's own store under `DATA_DIR/exports/<object_prefix>/`. Files are kept gzipped
 * whatever the requested format (the format is honored only with storage credentials); the
 * download link wraps them into one ZIP.
 */
export async function localTarget(dataDir: string, run: ExportRun): Promise<ExportTarget> {
  const dir = localExportDir(dataDir, run.object_prefix)
  // A retried run starts over: leftovers of an earlier attempt must not be served.
  await rm(dir, { recursive: true, force: true })
  await mkdir(dir, { recursive: true })
  return {
    format: 'gzip',
    pathFor: (fileName) => path.join(dir, fileName),
    deliver: async () => undefined,
    close: async () => {},
  }
}

const CONTENT_TYPES: Record<OutputFormat, string> = { zip: 'application/zip', gzip: 'application/gzip' }

/** The workspace's bucket: each file is written to scratch space, uploaded, then removed. */
export async function bucketTarget(dataDir: string, run: ExportRun, storage: ExportStorage): Promise<ExportTarget> {
  const scratch = uploadScratchDir(dataDir, run.id)
  await rm(scratch, { recursive: true, force: true })
  await mkdir(scratch, { recursive: true })
  const uploader = s3Uploader(storage)
  return {
    format: run.request.output_format,
    pathFor: (fileName) => path.join(scratch, fileName),
    async deliver(fileName, filePath) {
      const key = `${run.object_prefix}/${fileName}`
      await uploader.upload(key, filePath, CONTENT_TYPES[run.request.output_format])
      await rm(filePath, { force: true })
      return key
    },
    async close() {
      uploader.close()
      await rm(scratch, { recursive: true, force: true })
    },
  }
}
