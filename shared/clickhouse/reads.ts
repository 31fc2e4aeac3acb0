import type { Filter } from '../domain/segment-filter.js'
import type { ClickHouse } from './client.js'
import { countSegmentMembers } from './segment-repository.js'

/**
 * The ClickHouse answers the API gives, whoever holds ClickHouse: this process (one-process layout,
 * or a ClickHouse server named by CLICKHOUSE_URL) or the worker process holding the embedded engine
 * (`shared/queue/clickhouse-reads.ts` asks it over Redis).
 */
export interface ClickHouseReads {
  segmentSize(workspaceId: string, filter: Filter): Promise<number>
  /** Readiness: how this process reaches ClickHouse, or a rejection saying why it cannot. */
  check(): Promise<string>
}

/** Reads on a ClickHouse this process holds. */
export function directReads(ch: ClickHouse): ClickHouseReads {
  return {
    segmentSize: (workspaceId, filter) => countSegmentMembers(ch, workspaceId, filter),
    async check() {
      const p = await ch.client.ping()
      if (!p.success) throw new Error(`unreachable: ${(p as { error?: Error }).error?.message ?? 'no answer'}`)
      return ch.embedded ? 'ok (embedded engine in this process)' : 'ok (server)'
    },
  }
}
