import { describe, expect, it } from 'vitest'
import { bucketFor, RateLimitedPaths } from '../../../shared/domain/rate-limits.js'

describe('bucketFor', () => {
  it('gives the documented default of each bucket', () => {
    expect(bucketFor('/users/track', {})).toEqual({ name: '/users/track', limit: 3000, windowSeconds: 3 })
    for (const p of ['/users/merge', '/users/identify', '/users/delete', '/users/alias/new', '/users/alias/update']) {
      expect(bucketFor(p, {})).toEqual({ name: '/users/identity', limit: 20_000, windowSeconds: 60 })
    }
    for (const p of ['/users/external_ids/rename', '/users/external_ids/remove']) {
      expect(bucketFor(p, {})).toEqual({ name: '/users/external_ids', limit: 1000, windowSeconds: 60 })
    }
    expect(bucketFor('/users/track/sync', {})).toEqual({ name: '/users/track/sync', limit: 500, windowSeconds: 60 })
    for (const p of ['/subscription/status/set', '/v2/subscription/status/set']) {
      expect(bucketFor(p, {})).toEqual({ name: '/subscription/status/set', limit: 5000, windowSeconds: 60 })
    }
    expect(bucketFor('/users/export/ids', {})).toEqual({ name: '/users/export/ids', limit: 250, windowSeconds: 60 })
  })

  it('puts every other endpoint in the shared default of 250,000 an hour', () => {
    const reads = ['/subscription/user/status', '/email/hard_bounces', '/email/unsubscribes', '/email/blocklist', '/email/blacklist']
    for (const p of ['/users/export/segment', '/subscription/status/get', '/email/status', '/requests/abc', '/anything', ...reads]) {
      expect(bucketFor(p, {})).toEqual({ name: 'default', limit: 250_000, windowSeconds: 3600 })
      expect(RateLimitedPaths).not.toContain(p)
    }
  })

  it('applies default_per_hour to the default bucket only', () => {
    const settings = { default_per_hour: 40 }
    expect(bucketFor('/email/status', settings)).toEqual({ name: 'default', limit: 40, windowSeconds: 3600 })
    expect(bucketFor('/users/track', settings)).toEqual({ name: '/users/track', limit: 3000, windowSeconds: 3 })
  })

  it('applies an endpoint override to its whole shared bucket, and to nothing else', () => {
    const settings = { endpoints: { '/users/identify': { limit: 7, window_seconds: 30 } } }
    for (const p of ['/users/merge', '/users/identify', '/users/delete']) {
      expect(bucketFor(p, settings)).toEqual({ name: '/users/identity', limit: 7, windowSeconds: 30 })
    }
    expect(bucketFor('/users/track', settings).limit).toBe(3000)
    expect(bucketFor('/email/status', settings).limit).toBe(250_000)
  })

  it('lets /v2/subscription/status/set name the bucket it shares with /subscription/status/set', () => {
    const settings = { endpoints: { '/v2/subscription/status/set': { limit: 9, window_seconds: 5 } } }
    expect(bucketFor('/subscription/status/set', settings)).toMatchObject({ limit: 9, windowSeconds: 5 })
  })

  it('lists exactly the paths with their own bucket as nameable', () => {
    expect([...RateLimitedPaths].sort()).toEqual(
      [
        '/subscription/status/set',
        '/users/delete',
        '/users/export/ids',
        '/users/identify',
        '/users/merge',
        '/users/track',
        '/v2/subscription/status/set',
        '/users/alias/new',
        '/users/alias/update',
        '/users/external_ids/rename',
        '/users/external_ids/remove',
        '/users/track/sync',
      ].sort(),
    )
  })
})
