import { Queue, type JobsOptions } from 'bullmq'
import type { Redis } from 'ioredis'
import { CALLBACK_QUEUE } from './callback-jobs.js'
import { EXPORT_QUEUE } from './export-jobs.js'
import { IDENTITY_QUEUE } from './identity-jobs.js'
import { isTrackQueue, trackQueueName } from './track-jobs.js'

/** Queue names by worker role; each is defined with its queue's job contract. */
export const QueueNames = {
  track: trackQueueName,
  identity: IDENTITY_QUEUE,
  export: EXPORT_QUEUE,
  callback: CALLBACK_QUEUE,
} as const

export type WorkerRole = 'track' | 'identity' | 'export' | 'callback'
export const WorkerRoles: WorkerRole[] = ['track', 'identity', 'export', 'callback']

export function queueNamesFor(role: WorkerRole, partitions: number): string[] {
  if (role === 'track') return Array.from({ length: partitions }, (_, p) => QueueNames.track(p))
  return [QueueNames[role]]
}

/** Queues whose jobs must run strictly one at a time, in order, across every worker process. */
export function isOrderedQueue(name: string): boolean {
  return isTrackQueue(name) || name === IDENTITY_QUEUE
}

const defaultJobOptions: JobsOptions = {
  removeOnComplete: { age: 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
}

/** Lazily opened BullMQ queues sharing one Redis connection. */
export class QueueRegistry {
  private readonly queues = new Map<string, Queue>()

  constructor(readonly connection: Redis, readonly prefix: string, readonly partitions: number) {}

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
    return [...queueNamesFor('track', this.partitions), QueueNames.identity, QueueNames.export, QueueNames.callback]
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()))
  }
}
