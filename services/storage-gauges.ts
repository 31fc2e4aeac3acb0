import type { Redis } from 'ioredis'
import type { Config } from '../shared/config.js'
import type { Pool } from '../shared/db/pool.js'
import type { Logger } from '../shared/logger.js'
import type { Metrics } from '../shared/metrics.js'
import { readVacuumState } from './postgres-check.js'
import { readRedisDurability } from './redis-check.js'

/** Settings change rarely and dead rows grow over minutes: a read every 30 s is current enough for alerts. */
export const STORAGE_GAUGES_INTERVAL_MS = 30_000

/** A store as the gauges name it: host and port (and the database), never the URL's credentials. */
function serverOf(url: string, withDatabase = false): string {
  const u = new URL(url)
  return `${u.hostname}:${u.port || (u.protocol.startsWith('postgres') ? '5432' : '6379')}${withDatabase ? u.pathname : ''}`
}

/**
 * Keeps the Redis durability and Postgres vacuum gauges current: read at once, then every
 * `intervalMs`, outside scrapes so a slow store never holds a scrape up. A store that cannot be
 * read leaves its gauges empty (an alert on them then stays silent; the service's own errors
 * say the store is away). `refresh` reads now; `stop` ends the timer.
 */
export function watchStorageSettings(
  stores: { config: Pick<Config, 'REDIS_URL' | 'DATABASE_URL'>; redis: Redis; pg: Pool; logger: Logger },
  metrics: Metrics,
  intervalMs = STORAGE_GAUGES_INTERVAL_MS,
): { refresh(): Promise<void>; stop(): void } {
  const redis = serverOf(stores.config.REDIS_URL)
  const database = serverOf(stores.config.DATABASE_URL, true)
  const refresh = async () => {
    await Promise.all([
      readRedisDurability(stores.redis).then(
        (d) => {
          metrics.redisAofEnabled.set({ redis }, d.aof ? 1 : 0)
          metrics.redisEvicting.reset()
          metrics.redisEvicting.set({ redis, policy: d.policy }, d.evicting ? 1 : 0)
        },
        (e) => {
          metrics.redisAofEnabled.reset()
          metrics.redisEvicting.reset()
          stores.logger.debug({ err: (e as Error).message }, 'could not read the Redis settings for the metrics')
        },
      ),
      readVacuumState(stores.pg).then(
        (v) => {
          metrics.postgresAutovacuum.set({ database }, v.autovacuum ? 1 : 0)
          metrics.postgresDeadRows.reset()
          metrics.postgresDeadRowRatio.reset()
          for (const t of v.tables) {
            metrics.postgresDeadRows.set({ database, table: t.table }, t.dead)
            metrics.postgresDeadRowRatio.set({ database, table: t.table }, t.deadShare)
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
