import type { WorkerRole } from '../queue/queues.js'

/**
 * A server's connections for one process, by what it runs (the history sweep has its own,
 * `ClickHouse.beside`). Statements past the pool wait for a connection instead of opening more:
 * - the API's reads (segment counts, export summaries, readiness): a few at once;
 * - any writing worker: one insert in flight per table (the group commit, BatchInserter);
 * - track: one batch per partition in flight, each with its reads; identity: one batch;
 * - export: a page and its summaries per concurrent export; callback: none.
 */
export function clickhouseConnectionsFor(p: { api: boolean; workers: readonly WorkerRole[]; partitions: number; concurrency: number }): number {
  const has = (r: WorkerRole) => p.workers.includes(r)
  const writes = has('track') || has('identity')
  const n =
    (p.api ? API_READS : 0) +
    (writes ? INSERT_TABLES : 0) +
    (has('track') ? p.partitions : 0) +
    (has('identity') ? 1 : 0) +
    (has('export') ? p.concurrency : 0)
  return Math.max(n, 1)
}

const API_READS = 6
/** events, profile_snapshots, profile_overrides. */
const INSERT_TABLES = 3
