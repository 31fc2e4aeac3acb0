import type { ClickHouse } from '../../shared/clickhouse/client.js'
import { readEventSummaries } from '../../shared/clickhouse/event-repository.js'

/**
 * How many occurrences of one kind and name each profile has, as exports and /users/export/ids
 * count them (each event id once, from the event history); 0 for a profile with none.
 */
export async function occurrenceCounts(ch: ClickHouse, workspaceId: string, profileIds: number[], kind: 'event' | 'purchase', name: string) {
  const summaries = await readEventSummaries(ch, workspaceId, profileIds)
  return (profileId: number) => summaries.get(profileId)?.find((s) => s.kind === kind && s.name === name)?.count ?? 0
}
