import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Logger } from '../../shared/logger.js'
import { trackQueuesOf, type TrackLayouts } from '../../shared/queue/track-layout.js'
import { redisScript } from '../../shared/redis-script.js'

/** What the group starts on a queue and closes when the queue is dealt elsewhere (a BullMQ worker). */
export interface QueueWorker {
  close(force?: boolean): Promise<void>
}

/**
 * KEYS: the group's members (a sorted set scored by expiry, in Redis's clock). ARGV: this member,
 * its time to live (ms). Renews the member, drops the expired, answers the members.
 */
const BEAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return redis.call('ZRANGE', KEYS[1], 0, -1)`
const beatScript = redisScript(BEAT)

/**
 * The queues dealt to member `index` of `members`: every `members`-th queue when there are at least
 * as many queues as members, else one queue (several members then share it; only one applies at
 * a time, the others stand ready).
 */
export function dealtQueues(queues: readonly string[], index: number, members: number): string[] {
  if (queues.length === 0) return []
  if (queues.length < members) return [queues[index % queues.length]]
  return queues.filter((_, j) => j % members === index)
}

/**
 * The track partitions a worker process works: its share of the layout's partition queues (a
 * draining generation's too) among every process running the track role, dealt again when one
 * joins, one stops renewing its membership (dies, or is cut off) or the layout changes. Kafka's
 * consumer group, without its one risk: a partition briefly worked by two processes (one closing,
 * one starting) is safe, as each queue runs one job at a time across all of them and every batch
 * applies exactly once; the dealing only spreads the work. A dead member's partitions are dealt
 * again within `ttlMs`, and its active job is given back when its lock expires.
 */
export async function startPartitionGroup(opts: {
  redis: Redis
  prefix: string
  layouts: TrackLayouts
  ttlMs: number
  start: (queue: string) => Promise<QueueWorker>
  logger: Logger
}): Promise<{ name: string; close(force?: boolean): Promise<void> }> {
  const { redis, layouts, logger } = opts
  const me = randomUUID()
  const key = `${opts.prefix}:members:track`
  const running = new Map<string, QueueWorker>()
  let members: string[] = [me]
  let closing = false
  // One deal at a time, in order.
  let dealing = Promise.resolve()

  const deal = () => {
    dealing = dealing.then(async () => {
      if (closing) return
      const wanted = new Set(dealtQueues(trackQueuesOf(layouts.current()), Math.max(0, members.indexOf(me)), members.length))
      for (const [queue, worker] of running) {
        if (wanted.has(queue)) continue
        running.delete(queue)
        // Its active job finishes first; meanwhile its new owner waits (one job at a time per queue).
        void worker.close().catch((e) => logger.warn({ err: (e as Error).message, queue }, 'closing a partition dealt elsewhere failed'))
      }
      for (const queue of wanted) if (!running.has(queue)) running.set(queue, await opts.start(queue))
      logger.debug({ queues: [...running.keys()], members: members.length }, 'track partitions dealt')
    })
    return dealing
  }

  const beat = async () => {
    try {
      const now = ((await beatScript(redis, [key], [me, opts.ttlMs])) as string[]).sort()
      if (now.length !== members.length || now.some((m, i) => m !== members[i])) {
        members = now
        await deal()
      }
    } catch (e) {
      logger.warn({ err: (e as Error).message }, 'track partition group: Redis unavailable; keeping the partitions dealt')
    }
  }
  await beat()
  await deal()
  const timer = setInterval(() => void beat(), Math.max(200, Math.floor(opts.ttlMs / 3)))
  const stopListening = layouts.onChange(() => void deal())

  return {
    name: 'track',
    async close(force?: boolean) {
      closing = true
      clearInterval(timer)
      stopListening()
      await dealing
      // The others deal this process's partitions among themselves at their next beat.
      await redis.zrem(key, me).catch(() => {})
      await Promise.all([...running.values()].map((w) => w.close(force)))
      running.clear()
    },
  }
}
