import type { Filter } from '../domain/segment-filter.js'
import type { KindedSummary } from '../domain/user-record.js'
import type { ClickHouse } from './client.js'
import { readEventSummaries } from './event-repository.js'
import { countSegmentMembers, workspaceRowsRecently } from './segment-repository.js'

/**
 * The ClickHouse answers the API gives, whoever holds ClickHouse: this process (one-process layout,
 * or a ClickHouse server named by CLICKHOUSE_URL) or the worker process holding the embedded engine
 * (`shared/queue/clickhouse-reads.ts` asks it over Redis).
 */
export interface ClickHouseReads {
  segmentSize(workspaceId: string, filter: Filter): Promise<number>
  /** Each profile's event and purchase summaries, from the event history (`readEventSummaries`). */
  eventSummaries(workspaceId: string, profileIds: number[]): Promise<Map<number, KindedSummary[]>>
  /** Readiness: how this process reaches ClickHouse, or a rejection saying why it cannot. */
  check(): Promise<string>
}

/**
 * Reads on a ClickHouse this process holds; counts of the same segment share runs (`SharedRuns`),
 * and every count sizes its plan by a workspace row count at most seconds old.
 */
export function directReads(ch: ClickHouse): ClickHouseReads {
  const counts = new SharedRuns<number>()
  const workspaceRows = workspaceRowsRecently(ch)
  const summaries = new MergedReads<KindedSummary[]>((workspaceId, profileIds) => readEventSummaries(ch, workspaceId, profileIds))
  return {
    segmentSize: (workspaceId, filter) => counts.run(JSON.stringify([workspaceId, filter]), () => countSegmentMembers(ch, workspaceId, filter, { workspaceRows })),
    eventSummaries: (workspaceId, profileIds) => summaries.read(workspaceId, profileIds),
    async check() {
      const p = await ch.client.ping()
      if (!p.success) throw new Error(`unreachable: ${(p as { error?: Error }).error?.message ?? 'no answer'}`)
      return ch.embedded ? 'ok (embedded engine in this process)' : 'ok (server)'
    },
  }
}

/**
 * Identical reads share a run. A read arriving while its key runs waits for the next run, which
 * starts when the current one ends and answers every read that arrived in between: each answer
 * still comes from a query started after its read arrived, so it sees every write before the read.
 * A burst of reads of one segment costs one count running and one waiting instead of one count a
 * read (counts side by side share the cores, each got slower than the reads came, and they piled up).
 */
export class SharedRuns<V> {
  private readonly runs = new Map<string, { current: Promise<V>; next?: Promise<V> }>()

  run(key: string, read: () => Promise<V>): Promise<V> {
    const entry = this.runs.get(key)
    if (!entry) return this.start(key, read)
    entry.next ??= entry.current.then(
      () => this.start(key, read),
      () => this.start(key, read),
    )
    return entry.next
  }

  private start(key: string, read: () => Promise<V>): Promise<V> {
    const entry: { current: Promise<V>; next?: Promise<V> } = { current: Promise.resolve().then(read) }
    this.runs.set(key, entry)
    const settled = () => {
      if (this.runs.get(key) === entry && !entry.next) this.runs.delete(key)
    }
    entry.current.then(settled, settled)
    return entry.current
  }
}

/**
 * Reads of some profiles' values that arrive while one runs share the next run: one query for
 * all their profiles (per workspace), each read answered with its own. A query on the embedded
 * engine costs ~8 ms however few rows it reads (`readEventSummaries`, measured on a near-empty
 * table), and the engine runs one at a time: sixteen `/users/export/ids` in flight would be
 * sixteen such queries in a row. As with `SharedRuns`, each read's answer comes from a query started
 * after it arrived.
 */
export class MergedReads<V> {
  private readonly next = new Map<string, { ids: Set<number>; answer: Promise<Map<number, V>> }>()
  private readonly current = new Map<string, Promise<unknown>>()

  constructor(private readonly query: (workspaceId: string, profileIds: number[]) => Promise<Map<number, V>>) {}

  async read(workspaceId: string, profileIds: number[]): Promise<Map<number, V>> {
    let run = this.next.get(workspaceId)
    if (!run) run = this.start(workspaceId)
    for (const id of profileIds) run.ids.add(id)
    const all = await run.answer
    const mine = new Map<number, V>()
    for (const id of profileIds) {
      const v = all.get(id)
      if (v !== undefined) mine.set(id, v)
    }
    return mine
  }

  /** The next run of a workspace: it gathers ids until the current run ends, then queries them all. */
  private start(workspaceId: string) {
    const ids = new Set<number>()
    const after = this.current.get(workspaceId) ?? Promise.resolve()
    const answer = after.then(ignore, ignore).then(() => {
      this.next.delete(workspaceId)
      return this.query(workspaceId, [...ids])
    })
    const run = { ids, answer }
    this.next.set(workspaceId, run)
    this.current.set(workspaceId, answer)
    const settled = () => {
      if (this.current.get(workspaceId) === answer) this.current.delete(workspaceId)
    }
    answer.then(settled, settled)
    return run
  }
}

const ignore = () => {}
