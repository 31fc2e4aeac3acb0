import { setTimeout as sleep } from 'node:timers/promises'
import type { JobType } from 'bullmq'
import { queueNamesFor, type QueueRegistry } from '../../shared/queue/queues.js'

const POLL_MS = 25

/** States of a track job that has not finished (track jobs are never delayed or prioritized; checking costs nothing). */
const UNFINISHED: JobType[] = ['active', 'waiting', 'prioritized', 'delayed']

/** Whether a track partition still holds a job added at or before `acceptedAt` that has not finished. */
async function holdsEarlierWork(queues: QueueRegistry, queue: string, acceptedAt: number): Promise<boolean> {
  // Oldest first, one per state: a partition runs its jobs in the order they were added.
  const oldest = await queues.get(queue).getJobs(UNFINISHED, 0, 0, true)
  return oldest.some((job) => job.timestamp <= acceptedAt)
}

/**
 * Ordering barrier between track and identity work. Track work is spread over partition queues
 * and identity work has its own queue, so nothing else orders them: a track job for a user
 * accepted before a merge could otherwise land on the merged profile after it is gone (and
 * recreate it). Before an identity job applies, it waits until no partition has a waiting or
 * active job added at or before the identity job's acceptance time (`<=`: a job of the same
 * millisecond may have been accepted first; waiting for it costs a poll). A job accepted later
 * never blocks it, and track work never waits for identity work, so the wait always ends while
 * track workers run. No deadline: the identity queue is ordered and retries in place anyway, so
 * giving up would only restart the same wait.
 */
export async function waitForEarlierTrackWork(queues: QueueRegistry, acceptedAt: number): Promise<void> {
  const partitions = queueNamesFor('track', queues.partitions)
  for (;;) {
    const busy = await Promise.all(partitions.map((q) => holdsEarlierWork(queues, q, acceptedAt)))
    if (!busy.includes(true)) return
    await sleep(POLL_MS)
  }
}
