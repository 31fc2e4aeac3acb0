import { setTimeout as sleep } from 'node:timers/promises'
import { queueNamesFor, type QueueRegistry } from '../../shared/queue/queues.js'
import { redisScript } from '../../shared/redis-script.js'

const POLL_MS = 25

/**
 * Whether any of the queues holds an unfinished job added at or before ARGV[1]: one of its
 * active jobs, or its oldest waiting one, which is the right end of `wait` (BullMQ pushes new jobs
 * on the left and takes from the right; a job whose worker died goes back on the right). Jobs
 * that joined a batch stay in `wait` until their batch is applied, so they count. Track jobs are
 * never delayed or prioritized, so no other state can hold one. One round trip for every
 * partition, where BullMQ's getJobs costs several per partition. KEYS: each queue's `wait` and
 * `active` lists; ARGV: the time, then each queue's job key prefix.
 */
const HOLDS_EARLIER = `
local t = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
  local ids = redis.call('LRANGE', KEYS[2 * i], 0, -1)
  local oldest = redis.call('LINDEX', KEYS[2 * i - 1], -1)
  if oldest then ids[#ids + 1] = oldest end
  for _, id in ipairs(ids) do
    local added = tonumber(redis.call('HGET', ARGV[i + 1] .. id, 'timestamp'))
    if added and added <= t then return 1 end
  end
end
return 0`
const holdsEarlier = redisScript(HOLDS_EARLIER)

/**
 * Ordering barrier between track and identity work. Track work is spread over partition queues
 * and identity work has its own queue, so nothing else orders them: a track job for a user
 * accepted before a merge could otherwise land on the merged profile after it is gone (and
 * recreate it). Before an identity batch applies, it waits until no partition has a waiting or
 * active job added at or before the newest acceptance time in the batch (`<=`: a job of the same
 * millisecond may have been accepted first; waiting for it costs a poll). One wait per batch,
 * polling all partitions in one round trip. A job accepted later never blocks it, and track work
 * never waits for identity work, so the wait always ends while track workers run. No deadline:
 * the identity queue is ordered and retries in place anyway, so giving up would only restart the
 * same wait.
 */
export async function waitForEarlierTrackWork(queues: QueueRegistry, acceptedAt: number): Promise<void> {
  // The layout as it is now (a change elsewhere may be seconds old here), with the draining generation's partitions.
  const partitions = queueNamesFor('track', await queues.layouts.refresh()).map((name) => queues.get(name))
  const keys = partitions.flatMap((q) => [q.keys.wait, q.keys.active])
  const prefixes = partitions.map((q) => q.toKey(''))
  while ((await holdsEarlier(queues.connection, keys, [acceptedAt, ...prefixes])) === 1) await sleep(POLL_MS)
}
