import type { MemberRow } from '../../shared/clickhouse/segment-repository.js'
import type { ExportRun } from '../../shared/db/repositories/export-repository.js'
import { ProfileFieldNames } from '../../shared/domain/profile-fields.js'
import { projectRecord, withSummaries, type KindedSummary, type Projection, type StoredRecord } from '../../shared/domain/user-record.js'

/**
 * The global control group record holds the fields of interface.md 2.4 up to `apps` (every
 * profile field among them): no subscription group, campaign, canvas, card or uninstall fields.
 */
export const GlobalControlGroupFields: readonly string[] = [
  'created_at', 'external_id', 'user_aliases', 'service_id', 'random_bucket', ...ProfileFieldNames,
  'total_revenue', 'attributed_campaign', 'attributed_source', 'attributed_adgroup', 'attributed_ad', 'custom_attributes',
  'custom_events', 'purchases', 'devices', 'push_tokens', 'apps',
]

export function projectionOf(run: ExportRun, now: Date): Projection {
  const asked = run.request.fields_to_export
  if (run.kind === 'global_control_group') return { fields: asked.filter((f) => GlobalControlGroupFields.includes(f)), now }
  return { fields: asked, customAttributes: run.request.custom_attributes_to_export, now }
}

/** A member as exported: its stored record and its event and purchase summaries from the history. */
export interface ExportMember extends MemberRow {
  summaries: readonly KindedSummary[]
}

/** Lines are handed to the compressor in chunks of about this size rather than one by one. */
const CHUNK_BYTES = 64 * 1024

/**
 * Turns stored records into export lines (one JSON object per line, as a user sees it: the
 * 90-day window and the fields asked for), counting the users written.
 */
export function recordLines(run: ExportRun, now: Date) {
  const projection = projectionOf(run, now)
  return (rows: AsyncIterable<ExportMember>) => {
    let users = 0
    async function* lines(): AsyncGenerator<Buffer> {
      let chunk = ''
      for await (const row of rows) {
        chunk += `${JSON.stringify(projectRecord(withSummaries(JSON.parse(row.record) as StoredRecord, row.summaries), projection))}\n`
        users++
        if (chunk.length >= CHUNK_BYTES) {
          yield Buffer.from(chunk)
          chunk = ''
        }
      }
      if (chunk) yield Buffer.from(chunk)
    }
    return { lines: lines(), users: () => users }
  }
}
