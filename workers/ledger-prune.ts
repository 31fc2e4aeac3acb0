import type { Config } from '../shared/config.js'
import type { Pool } from '../shared/db/pool.js'
import { pruneLedger } from '../shared/db/repositories/job-ledger-repository.js'
import type { Logger } from '../shared/logger.js'

/** Rows one DELETE takes at most: each statement holds its row locks and writes its WAL briefly, however large the backlog. */
const CHUNK = 5000

/**
 * Deletes the completed ledger rows older than LEDGER_RETENTION_SECONDS, a chunk per statement
 * (each its own transaction), until none is left; answers how many went.
 */
export async function pruneAppliedJobs(deps: { pg: Pool; config: Config }): Promise<number> {
  let pruned = 0
  for (;;) {
    const n = await pruneLedger(deps.pg, deps.config.LEDGER_RETENTION_SECONDS, CHUNK)
    pruned += n
    if (n < CHUNK) return pruned
  }
}

/**
 * Prunes the ledger every LEDGER_PRUNE_SECONDS in processes running the track or identity worker
 * (the ledger's writers). The first prune waits one interval: a fleet back from a long stop first
 * takes up the jobs its stalled locks hand back. Answers a function that stops it.
 */
export function startLedgerPruner(deps: { pg: Pool; config: Config; logger: Logger }): () => void {
  let running = false
  const timer = setInterval(() => {
    if (running) return
    running = true
    pruneAppliedJobs(deps)
      .then((n) => n && deps.logger.info({ pruned: n }, 'pruned applied-jobs ledger rows past LEDGER_RETENTION_SECONDS'))
      .catch((e) => deps.logger.warn({ err: (e as Error).message }, 'ledger prune failed; retrying at the next interval'))
      .finally(() => (running = false))
  }, deps.config.LEDGER_PRUNE_SECONDS * 1000)
  timer.unref()
  return () => clearInterval(timer)
}
