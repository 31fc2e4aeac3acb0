import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from '../../shared/logger.js'
import type { QueueRegistry } from '../../shared/queue/queues.js'
import type { RequestTracker } from '../../shared/queue/request-tracker.js'
import { trackQueueOf, type TrackLayout } from '../../shared/queue/track-layout.js'

const POLL_MS = 100
/**
 * A drained generation whose job count stays above zero this long with its queues empty counted
 * jobs that never reached a queue (an API process died between accepting a request and enqueueing
 * it): the change ends anyway, and says so.
 */
const LEAK_GRACE_MS = 30_000

/**
 * The ordering barrier of a partition change: the new generation's jobs wait until every job of
 * the generation being drained has applied (each user's old and new partitions may differ, and
 * its old work must go first). The old generation's jobs apply meanwhile as usual. Whichever
 * process first sees the old generation drained ends the change.
 */
export class LayoutDrain {
  private emptySince?: number

  constructor(private readonly deps: { queues: QueueRegistry; tracker: RequestTracker; logger: Logger }) {}

  /** Resolves once a job of `generation` may apply. */
  async mayApply(generation: number): Promise<void> {
    const { layouts } = this.deps.queues
    for (let layout = layouts.current(); layout.previous && generation === layout.generation; layout = await layouts.refresh()) {
      if (await this.drained(layout.previous)) {
        this.deps.logger.info({ generation: layout.generation, partitions: layout.partitions, drained: layout.previous }, 'track partition change complete: the previous layout is drained')
        await layouts.settle(layout.previous.generation)
        continue
      }
      await sleep(POLL_MS)
    }
  }

  private async drained(previous: NonNullable<TrackLayout['previous']>): Promise<boolean> {
    const queues = Array.from({ length: previous.partitions }, (_, p) => this.deps.queues.get(trackQueueOf(previous.generation, p)))
    const counts = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children')))
    if (counts.some((c) => Object.values(c).some((n) => n > 0))) {
      this.emptySince = undefined
      return false
    }
    const open = await this.deps.tracker.openJobs(previous.generation)
    if (open <= 0) return true
    this.emptySince ??= Date.now()
    if (Date.now() - this.emptySince < LEAK_GRACE_MS) return false
    this.deps.logger.error({ generation: previous.generation, jobs: open }, 'jobs accepted under the previous track layout never reached a queue (an API process died mid-request?): ending the change without them')
    return true
  }
}
