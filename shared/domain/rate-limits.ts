import type { RateLimitSettings } from '../db/repositories/workspace-repository.js'

export interface Bucket {
  name: string
  limit: number
  windowSeconds: number
}

/**
 * Published defaults of the best-known service of this kind. Endpoints in one bucket share it;
 * every endpoint without its own bucket shares `default` (250,000 an hour).
 */
export const DefaultBuckets: Record<string, { limit: number; windowSeconds: number; paths: string[] }> = {
  '/users/track': { limit: 3000, windowSeconds: 3, paths: ['/users/track'] },
  '/users/track/sync': { limit: 500, windowSeconds: 60, paths: ['/users/track/sync'] },
  '/users/identity': {
    limit: 20_000,
    windowSeconds: 60,
    paths: ['/users/merge', '/users/identify', '/users/delete', '/users/alias/new', '/users/alias/update'],
  },
  '/users/external_ids': { limit: 1000, windowSeconds: 60, paths: ['/users/external_ids/rename', '/users/external_ids/remove'] },
  '/subscription/status/set': { limit: 5000, windowSeconds: 60, paths: ['/subscription/status/set', '/v2/subscription/status/set'] },
  '/users/export/ids': { limit: 250, windowSeconds: 60, paths: ['/users/export/ids'] },
  default: { limit: 250_000, windowSeconds: 3600, paths: [] },
}

export const ScimBucket: Bucket = { name: 'scim', limit: 5000, windowSeconds: 86_400 }

const bucketOfPath = new Map<string, string>()
for (const [name, b] of Object.entries(DefaultBuckets)) for (const p of b.paths) bucketOfPath.set(p, name)

/**
 * The bucket in force for a path: the published default, overridden by the workspace's settings.
 * An override named by any path of a shared bucket applies to the whole bucket.
 */
export function bucketFor(path: string, settings: RateLimitSettings): Bucket {
  const name = bucketOfPath.get(path) ?? 'default'
  const base = DefaultBuckets[name]
  if (name === 'default') {
    return { name, limit: settings.default_per_hour ?? base.limit, windowSeconds: settings.default_per_hour ? 3600 : base.windowSeconds }
  }
  const override = base.paths.map((p) => settings.endpoints?.[p]).find(Boolean)
  return { name, limit: override?.limit ?? base.limit, windowSeconds: override?.window_seconds ?? base.windowSeconds }
}

/** Paths an operator may name in `endpoints`. */
export const RateLimitedPaths = [...bucketOfPath.keys()]
