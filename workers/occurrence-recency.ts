import type { ClickHouse } from '../shared/clickhouse/client.js'
import { lastOccurrences } from '../shared/clickhouse/event-repository.js'
import type { Queryable } from '../shared/db/pool.js'
import { overridesInto } from '../shared/db/repositories/override-repository.js'
import type { LastOccurrences } from '../shared/domain/prioritization.js'

/**
 * The recency prioritization reads, for a batch's transaction `db`: each profile's last occurrence
 * from ClickHouse, counting those of the profiles merged into it that the sweep has not yet
 * squashed. Those merges are read from Postgres by their index on `new_profile_id`; ClickHouse's
 * copy of them is ordered by the merged profile, so finding them there read all of them.
 */
export const occurrenceRecency =
  (ch: ClickHouse, db: Queryable): LastOccurrences =>
  async (workspaceId, profileIds) =>
    lastOccurrences(ch, workspaceId, profileIds, await overridesInto(db, profileIds))
