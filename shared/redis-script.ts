import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'

/**
 * A Lua script called by its SHA (EVALSHA): its text crosses the wire and is hashed by Redis only
 * once, not on every call as EVAL does. After a Redis restart has emptied the script cache the
 * call is answered NOSCRIPT, and the text is sent once more (EVAL, which caches it again).
 */
export function redisScript(lua: string): (redis: Redis, keys: readonly string[], args: readonly (string | number | Buffer)[]) => Promise<unknown> {
  const sha = createHash('sha1').update(lua).digest('hex')
  return async (redis, keys, args) => {
    try {
      return await redis.evalsha(sha, keys.length, ...keys, ...args)
    } catch (e) {
      if (!String((e as Error).message).startsWith('NOSCRIPT')) throw e
      return redis.eval(lua, keys.length, ...keys, ...args)
    }
  }
}
