import type { ClickHouse } from '../../shared/clickhouse/client.js'
import { copyOverriddenEvents, eraseRowsOf } from '../../shared/clickhouse/history-repository.js'
import type { Config } from '../../shared/config.js'
import type { Pool } from '../../shared/db/pool.js'
import { oldestIncompleteJob } from '../../shared/db/repositories/job-ledger-repository.js'
import { forgetSwept, oldestPending, pendingErasures, pendingOverrides, withSweepLock, type Erasures } from '../../shared/db/repositories/override-repository.js'
import type { Logger } from '../../shared/logger.js'

/** Overrides and erasures one pass takes at most; a larger backlog takes several passes in a row. */
const PASS_LIMIT = 100_000

export interface SweepDeps {
  pg: Pool
  clickhouse: ClickHouse
  config: Config
  logger: Logger
}

function byWorkspace(items: { workspaceId: string; profileId: number }[]): Erasures[] {
  const by = new Map<string, number[]>()
  // Pushed, not copied per item: a pass of 100,000 erasures in one workspace took minutes copying its list.
  for (const i of items) {
    let ids = by.get(i.workspaceId)
    if (!ids) by.set(i.workspaceId, (ids = []))
    ids.push(i.profileId)
  }
  return [...by].map(([workspaceId, profileIds]) => ({ workspaceId, profileIds }))
}

/**
 * The history sweep: the ClickHouse work that merges and deletes leave, done in bulk.
 * - Squash: the rows of every merged profile still overridden are copied under the profile they
 *   now belong to (INSERT ... SELECT, in chunks), then deleted with the merged profile's old snapshots
 *   (superseded by its tombstone) and its override.
 * - Erase: every row of the deleted profiles in `events` and `profile_snapshots` is removed.
 * One ALTER TABLE ... DELETE per table serves both (mutations rewrite the parts holding the rows,
 * so the rows leave the disk), waited for; the overrides table keeps only what is pending. Only
 * what is settled is taken: a profile merged or deleted after the oldest batch still owing
 * ClickHouse waits for the next pass (that batch may still write rows of it; see
 * oldestIncompleteJob). Pending work lives in Postgres and is
 * forgotten only after ClickHouse is done, and every step is safe to repeat, so a crash at any
 * point only repeats work. Answers what it did, or undefined when another process is sweeping.
 */
export async function sweepHistory(deps: SweepDeps): Promise<{ squashed: number; erased: number } | undefined> {
  return withSweepLock(deps.pg, async () => {
    const done = { squashed: 0, erased: 0 }
    for (;;) {
      // Pending work first, then the horizon: whatever committed with a batch still owing ClickHouse is then seen as unsettled.
      const overrides = await pendingOverrides(deps.pg, PASS_LIMIT)
      const erasures = await pendingErasures(deps.pg, PASS_LIMIT)
      const horizon = await oldestIncompleteJob(deps.pg, deps.config.ERASURE_MAX_DELAY_SECONDS / 2)
      const settled = <T extends { recordedAt: Date }>(items: T[]) => (horizon ? items.filter((i) => i.recordedAt < horizon) : items)
      const squash = settled(overrides)
      const erase = byWorkspace(settled(erasures))
      warnIfLate(deps, erasures[0]?.recordedAt)
      if (squash.length === 0 && erase.length === 0) return done

      await copyOverriddenEvents(deps.clickhouse, squash)
      const squashed = byWorkspace(squash.map((o) => ({ workspaceId: o.workspaceId, profileId: o.oldProfileId })))
      // A merged profile's old records go too: its user lives on in the kept profile, and erasing that one later must
      // leave nothing behind. Its overrides (and those ended by a delete) go last, so the table holds only pending ones.
      const gone = [...squashed, ...erase]
      // A pass whose mutations outlast half the erasure bound gives up loudly; the next one waits for the same mutations.
      const wait = { waitMs: (deps.config.ERASURE_MAX_DELAY_SECONDS * 1000) / 2 }
      await Promise.all([eraseRowsOf(deps.clickhouse, 'events', gone, wait), eraseRowsOf(deps.clickhouse, 'profile_snapshots', gone, wait)])
      await eraseRowsOf(deps.clickhouse, 'profile_overrides', gone, wait)
      await forgetSwept(deps.pg, squash, erase.flatMap((e) => e.profileIds))

      done.squashed += squash.length
      done.erased += erase.reduce((n, e) => n + e.profileIds.length, 0)
      if (overrides.length < PASS_LIMIT && erasures.length < PASS_LIMIT) return done
    }
  })
}

function warnIfLate(deps: SweepDeps, oldest: Date | undefined): void {
  const age = oldest ? (Date.now() - oldest.getTime()) / 1000 : 0
  if (age > deps.config.ERASURE_MAX_DELAY_SECONDS) {
    deps.logger.error({ oldestSeconds: Math.round(age), bound: deps.config.ERASURE_MAX_DELAY_SECONDS }, 'a deleted user is not yet erased within ERASURE_MAX_DELAY_SECONDS')
  }
}

/**
 * Runs a sweep pass in identity worker processes once the oldest pending merge or delete has
 * waited IDENTITY_SWEEP_SECONDS, so one pass takes everything a whole interval gathered; looks
 * every fifth of the interval (at most a minute). The clock is the pending work's own, in
 * Postgres, so restarts neither skip nor add passes. The advisory lock lets one process sweep at
 * a time. Answers a function that stops it.
 */
export function startHistorySweeper(deps: SweepDeps): () => void {
  const interval = deps.config.IDENTITY_SWEEP_SECONDS * 1000
  let running = false
  const tick = async () => {
    const oldest = await oldestPending(deps.pg)
    if (!oldest || Date.now() - oldest.getTime() < interval) return
    const started = Date.now()
    const done = await sweepHistory(deps)
    if (done && (done.squashed || done.erased)) deps.logger.info({ ...done, seconds: (Date.now() - started) / 1000 }, 'history sweep: merges squashed, deleted users erased')
  }
  const timer = setInterval(() => {
    if (running) return
    running = true
    tick()
      .catch((e) => deps.logger.warn({ err: (e as Error).message }, 'history sweep failed; retrying at the next look'))
      .finally(() => (running = false))
  }, Math.min(60_000, Math.max(1000, interval / 5)))
  timer.unref()
  return () => clearInterval(timer)
}
