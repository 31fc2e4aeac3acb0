import type { Queue } from 'bullmq'
import type { Redis } from 'ioredis'
import { redisScript } from '../redis-script.js'

/**
 * The jobs waiting in a queue, read and removed in one round trip each, for a worker that applies
 * the jobs behind its active one as a batch. BullMQ's own calls cost a command per job each way
 * (a hash read and a parse into a Job; a removal script with a scan of the waiting list), which
 * took most of a batch's time for small jobs. These scripts use BullMQ's documented key layout:
 * the `wait` list (newest on the left) and one hash per job holding its `data`.
 */

/**
 * ids, payloads and enqueue timestamps of the oldest waiting jobs after skipping `start`, oldest
 * first; the first element says whether it stopped at the byte budget (ARGV[4]) before `count`
 * (at least one job).
 */
const PEEK = `
local n = redis.call('LLEN', KEYS[1])
local last = n - tonumber(ARGV[2]) - 1
if last < 0 then return {0} end
local first = math.max(0, last - tonumber(ARGV[3]) + 1)
local ids = redis.call('LRANGE', KEYS[1], first, last)
local budget = tonumber(ARGV[4])
local bytes = 0
local out = {0}
for i = #ids, 1, -1 do
  if bytes >= budget then out[1] = 1 break end
  local job = redis.call('HMGET', ARGV[1] .. ids[i], 'data', 'timestamp')
  local data = job[1] or ''
  bytes = bytes + #data
  out[#out + 1] = ids[i]
  out[#out + 1] = data
  out[#out + 1] = job[2] or '0'
end
return out`

/**
 * Removes waiting jobs given oldest first. They are the oldest in the list (nobody else takes jobs
 * of an ordered queue while its active job is held), so one trim removes them all; should the list
 * end differently (an operator removed a job meanwhile), each is removed by id.
 */
const REMOVE = `
local k = #ARGV - 1
local tail = redis.call('LRANGE', KEYS[1], -k, -1)
local same = #tail == k
if same then
  for i = 1, k do
    if tail[k - i + 1] ~= ARGV[i + 1] then same = false break end
  end
end
if same then
  redis.call('LTRIM', KEYS[1], 0, -k - 1)
else
  for i = 2, #ARGV do redis.call('LREM', KEYS[1], 1, ARGV[i]) end
end
for i = 2, #ARGV do redis.call('DEL', ARGV[1] .. ARGV[i], ARGV[1] .. ARGV[i] .. ':logs') end
return k`

const peekScript = redisScript(PEEK)
const removeScript = redisScript(REMOVE)

/**
 * Redis runs one script at a time: a read of many full-size payloads at once stalled every other
 * client (the API's requests) for milliseconds, so one read returns about this much and the caller reads on.
 */
const PEEK_BUDGET_BYTES = 128 * 1024

/**
 * Up to `count` waiting jobs of `queue` (whose connection `redis` is) after the `start` oldest,
 * oldest first, with their payloads as stored (JSON): the caller parses only the ones it takes;
 * `timestamp` is when the job was added (ms), its acceptance.
 * `cut` when the read stopped at its byte budget: more jobs may follow even if fewer than `count` came.
 */
export async function oldestWaiting(
  redis: Redis,
  queue: Queue,
  start: number,
  count: number,
): Promise<{ jobs: { id: string; payload: string; timestamp: number }[]; cut: boolean }> {
  const [cut, ...flat] = (await peekScript(redis, [queue.keys.wait], [queue.toKey(''), start, count, PEEK_BUDGET_BYTES])) as [number, ...string[]]
  const jobs: { id: string; payload: string; timestamp: number }[] = []
  // A job removed between the list read and its hash read has no data: skipped.
  for (let i = 0; i < flat.length; i += 3) if (flat[i + 1]) jobs.push({ id: flat[i], payload: flat[i + 1], timestamp: Number(flat[i + 2]) })
  return { jobs, cut: cut === 1 }
}

/** Removes waiting jobs (ids oldest first) with their hashes. */
export async function removeWaiting(redis: Redis, queue: Queue, ids: string[]): Promise<void> {
  if (ids.length === 0) return
  await removeScript(redis, [queue.keys.wait], [queue.toKey(''), ...ids])
}
