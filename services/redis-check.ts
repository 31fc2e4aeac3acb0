import type { Redis } from 'ioredis'
import type { Logger } from '../shared/logger.js'

/** What decides whether accepted work survives in Redis: eviction, and what Redis writes to disk. */
export interface RedisDurability {
  policy: string
  /** `maxmemory-policy` other than noeviction: a full Redis drops keys, queued jobs among them. */
  evicting: boolean
  aof: boolean
  /** RDB snapshots configured (`save`): some of the data survives a restart, not the last minutes. */
  rdbSaves: boolean
}

export async function readRedisDurability(redis: Redis): Promise<RedisDurability> {
  const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as string[]
  const [, aof] = (await redis.config('GET', 'appendonly')) as string[]
  const [, save] = (await redis.config('GET', 'save')) as string[]
  return { policy, evicting: policy !== 'noeviction', aof: aof === 'yes', rdbSaves: !!save }
}

/** Accepted work lives in Redis until applied: warn when Redis may evict it or loses it on restart. */
export async function warnAboutRedisDurability(redis: Redis, logger: Logger): Promise<void> {
  try {
    const d = await readRedisDurability(redis)
    if (d.evicting) {
      logger.warn({ policy: d.policy }, `Redis maxmemory-policy is ${d.policy}, not noeviction: queued jobs may be evicted and accepted work lost`)
    }
    if (!d.aof && !d.rdbSaves) {
      logger.warn('Redis keeps nothing on disk (no AOF, no RDB saves): accepted work not yet applied is lost if Redis restarts')
    }
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'could not read Redis configuration to check durability')
  }
}
