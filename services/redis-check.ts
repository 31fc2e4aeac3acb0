import type { Redis } from 'ioredis'
import type { Logger } from '../shared/logger.js'

/** Accepted work lives in Redis until applied: warn when Redis may evict it or loses it on restart. */
export async function warnAboutRedisDurability(redis: Redis, logger: Logger): Promise<void> {
  try {
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as string[]
    const [, aof] = (await redis.config('GET', 'appendonly')) as string[]
    const [, save] = (await redis.config('GET', 'save')) as string[]
    if (policy !== 'noeviction') {
      logger.warn({ policy }, `Redis maxmemory-policy is ${policy}, not noeviction: queued jobs may be evicted and accepted work lost`)
    }
    if (aof !== 'yes' && !save) {
      logger.warn('Redis keeps nothing on disk (no AOF, no RDB saves): accepted work not yet applied is lost if Redis restarts')
    }
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'could not read Redis configuration to check durability')
  }
}
