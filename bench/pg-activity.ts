// What the service's Postgres statements are doing through a part, sampled from pg_stat_activity:
// how many are running and how many of those wait for a lock another transaction holds, so that
// batches of different partitions waiting for each other's row locks show in the mixed part's figures.
import pg from 'pg'

export interface LockWaits {
  /** Samples taken (one every `everyMs`). */
  samples: number
  /** Statements seen running, summed over the samples. */
  running: number
  /** Of those, statements waiting for a heavyweight lock (a row's transaction, a relation). */
  waitingForLock: number
}

/** Samples the database's running statements every `everyMs` (other databases and this sampler excluded) until stopped. */
export async function sampleLockWaits(databaseUrl: string, everyMs = 100): Promise<{ stop(): Promise<LockWaits> }> {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  const out: LockWaits = { samples: 0, running: 0, waitingForLock: 0 }
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const r = await db.query<{ running: number; waiting: number }>(
        `SELECT count(*)::int AS running, count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waiting
           FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend'
            AND datname = current_database() AND pid <> pg_backend_pid()`,
      )
      out.samples++
      out.running += r.rows[0].running
      out.waitingForLock += r.rows[0].waiting
      await new Promise((resolve) => setTimeout(resolve, everyMs))
    }
  })()
  return {
    async stop() {
      stopped = true
      await loop
      await db.end()
      return out
    },
  }
}
