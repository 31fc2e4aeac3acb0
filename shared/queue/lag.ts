import type { Queue } from 'bullmq'
import type { Redis } from 'ioredis'
import type { QueueRegistry } from './queues.js'
import { trackQueuesOf } from './track-layout.js'

/**
 * Seconds since the oldest job not yet applied (active, or waiting: a batch's jobs stay waiting
 * until applied) was enqueued; 0 for an empty queue. Reads ids and one timestamp, never payloads.
 */
export async function queueLagSeconds(queue: Queue, redis: Redis, now = Date.now()): Promise<number> {
  // One script call: the oldest active id, then the oldest waiting id (either may be missing).
  const ids = await queue.getRanges(['active', 'wait'], 0, 0, true)
  if (ids.length === 0) return 0
  const stamps = await Promise.all(ids.map((id) => redis.hget(queue.toKey(id), 'timestamp')))
  const oldest = Math.min(...stamps.map((t) => (t === null ? now : Number(t))))
  return Math.max(0, (now - oldest) / 1000)
}

/** Lag of every track partition queue (a draining generation's too), by queue name. */
export async function trackLagSeconds(queues: QueueRegistry): Promise<Map<string, number>> {
  const names = trackQueuesOf(queues.layouts.current())
  const lags = await Promise.all(names.map((name) => queueLagSeconds(queues.get(name), queues.connection)))
  return new Map(names.map((name, i) => [name, lags[i]]))
}
