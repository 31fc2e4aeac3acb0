import type { Redis } from 'ioredis'
import type { Pool } from '../shared/db/pool.js'
import type { Logger } from '../shared/logger.js'
import type { Metrics } from '../shared/metrics.js'
import { readVacuumState } from './postgres-check.js'
import { readRedisDurability } from './redis-check.js'

/** Settings change rarely and dead rows grow over minutes: a read every 30 s is current enough for alerts. */
export const STORAGE_GAUGES_INTERVAL_MS = 30_000

/**
 * Keeps the Redis durability and Postgres vacuum gauges current: read at once, then every
 * `intervalMs`, outside scrapes so a slow store never holds a scrape up. A store that cannot be
 * read leaves its gauges empty (an alert on them then stays silent; the service's own errors
 * say the store is away). `refresh` reads now; `stop` ends the timer.
 */
export function watchStorageSettings(stores: { redis: Redis; pg: Pool; logger: Logger }, metrics: Metrics, intervalMs = STORAGE_GAUGES_INTERVAL_MS): { refresh(): Promise<void>; stop(): void } {
  const refresh = async () => {
    await Promise.all([
      readRedisDurability(stores.redis).then(
        (d) => {
          metrics.redisAofEnabled.set(d.aof ? 1 : 0)
          metrics.redisEvicting.reset()
          metrics.redisEvicting.set({ policy: d.policy }, d.evicting ? 1 : 0)
        },
        (e) => {
          metrics.redisAofEnabled.reset()
          metrics.redisEvicting.reset()
          stores.logger.debug({ err: (e as Error).message }, 'could not read the Redis settings for the metrics')
        },
      ),
      readVacuumState(stores.pg).then(
        (v) => {
          metrics.postgresAutovacuum.set(v.autovacuum ? 1 : 0)
          metrics.postgresDeadRows.reset()
          metrics.postgresDeadRowRatio.reset()
          for (const t of v.tables) {
            metrics.postgresDeadRows.set({ table: t.table }, t.dead)
            metrics.postgresDeadRowRatio.set({ table: t.table }, t.deadShare)
          }
        },
        (e) => {
          metrics.postgresAutovacuum.reset()
          metrics.postgresDeadRows.reset()
          metrics.postgresDeadRowRatio.reset()
          stores.logger.debug({ err: (e as Error).message }, 'could not read the Postgres vacuum state for the metrics')
        },
      ),
    ])
  }
  void refresh()
  const timer = setInterval(() => void refresh(), intervalMs)
  timer.unref()
  return { refresh, stop: () => clearInterval(timer) }
}
