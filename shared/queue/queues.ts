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

  allNames(): string[] {
    return [...queueNamesFor('track', this.partitions), QueueNames.identity, QueueNames.export, QueueNames.callback]
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()))
  }
}
