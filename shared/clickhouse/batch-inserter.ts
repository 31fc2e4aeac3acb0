import type { ClickHouseSettings } from '@clickhouse/client'
import type { ClickHouse } from './client.js'

interface Pending {
  rows: unknown[]
  settings: ClickHouseSettings
  waiters: { resolve: () => void; reject: (e: unknown) => void }[]
}

/**
 * Group commit for ClickHouse inserts. The embedded engine runs one statement at a time and each
 * insert costs a new part, so the rows of jobs running at the same moment are written as one
 * insert per table: while one insert is in flight, new rows gather for the next. Each caller's
 * promise settles when the insert holding its rows does. Idle, a single caller inserts at once.
 */
export class BatchInserter {
  private readonly pending = new Map<string, Pending>()
  private readonly busy = new Set<string>()

  constructor(private readonly ch: ClickHouse) {}

  insert(table: string, rows: unknown[], settings: ClickHouseSettings = {}): Promise<void> {
    if (rows.length === 0) return Promise.resolve()
    return new Promise((resolve, reject) => {
      let p = this.pending.get(table)
      if (!p) {
        p = { rows: [], settings, waiters: [] }
        this.pending.set(table, p)
      }
      for (const r of rows) p.rows.push(r)
      p.waiters.push({ resolve, reject })
      void this.drain(table)
    })
  }

  private async drain(table: string): Promise<void> {
    if (this.busy.has(table)) return
    this.busy.add(table)
    try {
      for (let batch = this.pending.get(table); batch; batch = this.pending.get(table)) {
        this.pending.delete(table)
        try {
          await this.ch.client.insert({ table, values: batch.rows, format: 'JSONEachRow', clickhouse_settings: batch.settings })
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
    b = new BatchInserter(ch)
    inserters.set(ch, b)
  }
  return b
}
