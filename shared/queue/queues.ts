import { Queue, type JobsOptions } from 'bullmq'
import type { Redis } from 'ioredis'

/** Queue names. Track work is spread over partition queues `track-0..N-1`, each one job at a time. */
export const QueueNames = {
  track: (partition: number) => `track-${partition}`,
  identity: 'identity',
  export: 'export',
  callback: 'callback',
} as const

export type WorkerRole = 'track' | 'identity' | 'export' | 'callback'
export const WorkerRoles: WorkerRole[] = ['track', 'identity', 'export', 'callback']

export function queueNamesFor(role: WorkerRole, partitions: number): string[] {
  if (role === 'track') return Array.from({ length: partitions }, (_, p) => QueueNames.track(p))
  return [QueueNames[role]]
}

/** Queues whose jobs must run strictly one at a time, in order, across every worker process. */
export function isOrderedQueue(name: string): boolean {
  return name.startsWith('track-') || name === QueueNames.identity
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
