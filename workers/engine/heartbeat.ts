import type { Redis } from 'ioredis'
import { HOLDER_HEARTBEAT_TTL_MS } from '../../shared/queue/clickhouse-reads.js'
import { redisScript } from '../../shared/redis-script.js'

const HEARTBEAT_EVERY_MS = 1_000

/** KEYS: the holder key. ARGV: our value, ttl. Takes an absent key or renews our own; answers 0 while another holds it. */
const BEAT = `
local h = redis.call('GET', KEYS[1])
if h and h ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`
const beatScript = redisScript(BEAT)

/** KEYS: the holder key. ARGV: our value. Deletes the key only if it is still ours: a successor may hold it already. */
const LEAVE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
const leaveScript = redisScript(LEAVE)

/** Takes the holder key unless another seat's heartbeat is alive; answers whether it is ours now. */
export async function takeSeat(redis: Redis, key: string, me: string): Promise<boolean> {
  return (await beatScript(redis, [key], [me, HOLDER_HEARTBEAT_TTL_MS])) === 1
}

/**
 * Keeps the holder key alive: API processes and engine-less workers know at once when nobody
 * holds the engine. `onLost` hears of another seat in the key (never expected: only one process
 * can lock the engine's directory).
 */
export async function keepSeat(redis: Redis, key: string, me: string, onLost: () => void): Promise<{ stop(): Promise<void> }> {
  const beat = () =>
    beatScript(redis, [key], [me, HOLDER_HEARTBEAT_TTL_MS]).then(
      (ours) => ours === 1 || onLost(),
      () => {},
    )
  await beat()
  const timer = setInterval(beat, HEARTBEAT_EVERY_MS)
  return {
    async stop() {
      clearInterval(timer)
      await leaveScript(redis, [key], [me]).catch(() => {})
    },
  }
}
