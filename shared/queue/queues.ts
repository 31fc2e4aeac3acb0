import { Queue, type JobsOptions } from 'bullmq'
import type { Redis } from 'ioredis'
import { CALLBACK_QUEUE, CallbackJob } from './callback-jobs.js'
import { EXPORT_QUEUE, ExportJob } from './export-jobs.js'
import { IDENTITY_QUEUE, IdentityJob } from './identity-jobs.js'
import { TrackJob, isTrackQueue, trackQueueName } from './track-jobs.js'
import { trackQueuesOf, type TrackLayout, type TrackLayouts } from './track-layout.js'

/**
 * The queues, one row per worker role: its queue name (defined with its job contract; track is
 * split into partitions `track-0..N-1`), its one job's name and payload schema, whether its jobs
 * run strictly one at a time, in order, across every process (and so retry in place: a BullMQ
 * retry would send the job to the back), and whether it uses ClickHouse (a process running only
 * roles that do not never opens it). What else lists queues is derived from this.
 */
export const Queues = {
  track: { name: trackQueueName, job: 'applyTrackBatch', payload: TrackJob, ordered: true, clickhouse: true },
  identity: { name: IDENTITY_QUEUE, job: 'applyIdentityChange', payload: IdentityJob, ordered: true, clickhouse: true },
  export: { name: EXPORT_QUEUE, job: 'runExport', payload: ExportJob, ordered: false, clickhouse: true },
  callback: { name: CALLBACK_QUEUE, job: 'deliverCallback', payload: CallbackJob, ordered: false, clickhouse: false },
} as const

/** Whether any of the roles needs ClickHouse. */
export const rolesUseClickHouse = (roles: readonly WorkerRole[]) => roles.some((r) => Queues[r].clickhouse)

export type WorkerRole = keyof typeof Queues
export const WorkerRoles = Object.keys(Queues) as WorkerRole[]

/** Queue names by worker role. */
export const QueueNames = Object.fromEntries(WorkerRoles.map((r) => [r, Queues[r].name])) as { [R in WorkerRole]: (typeof Queues)[R]['name'] }

/** A role's queues under a track layout: the track partitions of its current and draining generations, or the role's one queue. */
export function queueNamesFor(role: WorkerRole, layout: TrackLayout): string[] {
  if (role === 'track') return trackQueuesOf(layout)
  return [QueueNames[role]]
}

/** Queues whose jobs must run strictly one at a time, in order, across every process. */
export function isOrderedQueue(name: string): boolean {
  if (isTrackQueue(name)) return Queues.track.ordered
  return WorkerRoles.some((r) => Queues[r].name === name && Queues[r].ordered)
}

const defaultJobOptions: JobsOptions = {
  removeOnComplete: { age: 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
}

/** Lazily opened BullMQ queues sharing one Redis connection. */
export class QueueRegistry {
  private readonly queues = new Map<string, Queue>()

  constructor(readonly connection: Redis, readonly prefix: string, readonly layouts: TrackLayouts) {}

  get(name: string): Queue {
    let q = this.queues.get(name)
    if (!q) {
      q = new Queue(name, { connection: this.connection, prefix: this.prefix, defaultJobOptions })
      q.on('error', () => {})
      this.queues.set(name, q)
    }
    return q
  }

  /**
   * BullMQ workers connected to each queue (alive or not: a stopped process keeps its
   * connections), from one `CLIENT LIST` rather than BullMQ's one per queue, which grows with the
   * partitions twice over. Matched as BullMQ's `getWorkers` matches: the connection name it gives a
   * worker of that queue. Undefined where Redis refuses `CLIENT LIST` (some managed services).
   */
  async workerCounts(): Promise<Map<string, number> | undefined> {
    let list: string
    try {
      list = (await this.connection.client('LIST')) as string
    } catch {
      return undefined
    }
    const names = list.split('\n').map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
    const counts = new Map<string, number>()
    for (const queue of this.allNames()) {
      // A protected method of BullMQ's queues: the name its workers set on their connections.
      const base = (this.get(queue) as unknown as { clientName(): string }).clientName()
      counts.set(queue, names.filter((n) => n === base || n.startsWith(`${base}:w:`)).length)
    }
    return counts
  }

  allNames(): string[] {
    const layout = this.layouts.current()
    return WorkerRoles.flatMap((r) => queueNamesFor(r, layout))
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()))
  }
}
