import { Redis } from 'ioredis'

/**
 * A connection whose commands fail at once while Redis is away (one retry, no offline queue), for
 * work that answers a caller: the caller hears 503 rather than waiting. Connected before it is
 * returned.
 */
export async function connectFailFast(url: string, opts: { autoPipelining?: boolean } = {}): Promise<Redis> {
  const r = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true, enableAutoPipelining: opts.autoPipelining ?? false })
  r.on('error', () => {})
  await r.connect()
  return r
}

/** A connection that waits for Redis to come back, for blocking pops, subscriptions and BullMQ's workers. */
export function patientConnection(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: null })
  r.on('error', () => {})
  return r
}
