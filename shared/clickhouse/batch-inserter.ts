import { setTimeout as sleep } from 'node:timers/promises'
import type { ClickHouse, TabSeparatedInsert } from './client.js'
import { insertSettings } from './server.js'
import type { TsvRows } from './tsv.js'

/** A table's rows as the inserter writes them: TabSeparated lines of these columns, in order. */
export type InsertTarget = Omit<TabSeparatedInsert, 'body'>

/**
 * Settings of an insert into a ReplacingMergeTree whose every read already tells duplicates apart
 * (snapshots under FINAL, events by their ids): the engine need not collapse the rows of one insert
 * that share a sorting key as it writes them (a retried delivery is a second insert anyway), which
 * was a tenth of an insert's CPU.
 */
export const REPLACING_INSERT = { optimize_on_insert: 0 } as const

interface Pending {
  target: InsertTarget
  bodies: Buffer[]
  waiters: { resolve: () => void; reject: (e: unknown) => void }[]
}

/**
 * Group commit for ClickHouse inserts. The embedded engine runs one statement at a time and each
 * insert costs a new part, so the rows of jobs running at the same moment are written as one
 * insert per table: while one insert is in flight, new rows gather for the next. Each caller's
 * promise settles when the insert holding its rows does.
 *
 * An insert also costs the engine ~6-10 ms of CPU however few its rows, and its part is merged
 * again later: under a steady stream of small requests, inserts as fast as they finish are most
 * of the worker's CPU. With `intervalMs` (config CLICKHOUSE_INSERT_INTERVAL_MS, 0 by default) a
 * table gets at most one insert per interval, from one's start to the next's, rows arriving
 * meanwhile joining it: fewer inserts for up to that much more time to `done`. Rows arriving
 * after a longer quiet are inserted at once.
 */
export class BatchInserter {
  private readonly pending = new Map<string, Pending>()
  private readonly busy = new Set<string>()
  private readonly lastStart = new Map<string, number>()

  constructor(
    private readonly ch: ClickHouse,
    private readonly intervalMs: number,
  ) {}

  /** Inserts rows of the target's columns. */
  insert(target: InsertTarget, rows: TsvRows): Promise<void> {
    const body = rows.body
    if (body.length === 0) return Promise.resolve()
    return new Promise((resolve, reject) => {
      let p = this.pending.get(target.table)
      if (!p) {
        p = { target, bodies: [], waiters: [] }
        this.pending.set(target.table, p)
      }
      p.bodies.push(body)
      p.waiters.push({ resolve, reject })
      void this.drain(target.table)
    })
  }

  private async drain(table: string): Promise<void> {
    if (this.busy.has(table)) return
    this.busy.add(table)
    try {
      for (let batch = this.pending.get(table); batch; batch = this.pending.get(table)) {
        const due = (this.lastStart.get(table) ?? -Infinity) + this.intervalMs
        if (performance.now() < due) {
          // A timer can fire up to a millisecond early (libuv's clock is the loop's): wait the interval out.
          while (performance.now() < due) await sleep(due - performance.now())
          batch = this.pending.get(table)!
        }
        this.lastStart.set(table, performance.now())
        this.pending.delete(table)
        try {
          const { columns, settings } = batch.target
          await this.ch.insertTabSeparated({
            table,
            columns,
            settings: { ...insertSettings(this.ch), ...settings },
            body: batch.bodies.length === 1 ? batch.bodies[0] : Buffer.concat(batch.bodies),
          })
          for (const w of batch.waiters) w.resolve()
        } catch (e) {
          for (const w of batch.waiters) w.reject(e)
        }
      }
    } finally {
      this.busy.delete(table)
    }
  }
}

const inserters = new WeakMap<ClickHouse, BatchInserter>()

/** The process-wide inserter of a ClickHouse connection. */
export function batchInserterOf(ch: ClickHouse): BatchInserter {
  let b = inserters.get(ch)
  if (!b) {
    b = new BatchInserter(ch, ch.insertIntervalMs)
    inserters.set(ch, b)
  }
  return b
}
