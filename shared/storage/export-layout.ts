import path from 'node:path'

/**
 * Where an export's files go. Segment exports follow interface.md 4.5:
 * `segment-export/<segment_id>/<YYYY-MM-dd>/<random_uuid>-<unix_timestamp_export_started>`; the
 * global control group uses the same shape with its own root and the workspace id in the
 * segment's place: `global-control-group-export/<workspace_id>/<YYYY-MM-dd>/<uuid>-<timestamp>`.
 */
export function exportObjectPrefix(input: { kind: 'segment' | 'global_control_group'; ownerId: string; startedAt: Date; uuid: string }): string {
  const root = input.kind === 'segment' ? 'segment-export' : 'global-control-group-export'
  const day = input.startedAt.toISOString().slice(0, 10)
  const unixSeconds = Math.floor(input.startedAt.getTime() / 1000)
  return `${root}/${input.ownerId}/${day}/${input.uuid}-${unixSeconds}`
}

export type OutputFormat = 'zip' | 'gzip'

/** The n-th file of an export: `users-00000.zip` (holding `users-00000.json`) or `users-00000.gz`. */
export function exportFileName(index: number, format: OutputFormat): string {
  return `${exportFileStem(index)}.${format === 'zip' ? 'zip' : 'gz'}`
}

export function exportFileStem(index: number): string {
  return `users-${String(index).padStart(5, '0')}`
}

/** The newline-delimited JSON a file holds, under the name it has inside a ZIP. */
export function jsonEntryName(fileName: string): string {
  return `${fileName.replace(/\.(zip|gz)$/, '')}.json`
}

const SAFE_PREFIX = /^[a-z-]+\/[A-Za-z0-9_-]+\/\d{4}-\d{2}-\d{2}\/[0-9a-f-]+-\d+$/

/** Files kept by the service itself: `DATA_DIR/exports/<object_prefix>/`. */
export function localExportDir(dataDir: string, objectPrefix: string): string {
  // The prefix is built by exportObjectPrefix; anything else (a `..`) must never reach the file system.
  if (!SAFE_PREFIX.test(objectPrefix)) throw new Error(`not an export prefix: ${objectPrefix}`)
  return path.resolve(dataDir, 'exports', ...objectPrefix.split('/'))
}

/** Scratch space for files on their way to S3; removed after each run. */
export function uploadScratchDir(dataDir: string, exportId: string): string {
  if (!/^[0-9a-f-]+$/.test(exportId)) throw new Error(`not an export id: ${exportId}`)
  return path.resolve(dataDir, 'exports', '.uploading', exportId)
}
