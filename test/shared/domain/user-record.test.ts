import { describe, expect, it } from 'vitest'
import { byteOrder, storedRecordOf, withSummaries } from '../../../shared/domain/user-record.js'
import { storedProfile } from '../../helpers/stored-profile.js'

const stored = storedProfile(9, {
  workspace_id: 'ws',
  external_id: 'ann',
  email: 'ann@example.com',
  first_name: 'Ann',
  country: 'NO',
  push_subscribe: 'unsubscribed',
  custom_attributes: { plan: 'pro' },
  random_bucket: 42,
  updated_at: '2026-02-01T00:00:00.000Z',
  version: 5,
})

describe('the user record of a stored profile', () => {
  it('leaves empty fields out, splits summaries into events and purchases, and marks tokens by the push state', () => {
    const parts = { aliases: [{ alias_name: 'a-1', alias_label: 'crm' }], tokens: [{ app_id: 'app', token: 't', device_id: null }], subscriptions: [] }
    const record = withSummaries(storedRecordOf(stored, parts), [
      { kind: 'event', name: 'login', first: '2026-01-02T00:00:00.000Z', last: '2026-01-03T00:00:00.000Z', count: '2' as unknown as number },
      { kind: 'purchase', name: 'sku', first: '2026-01-04T00:00:00.000Z', last: '2026-01-04T00:00:00.000Z', count: 1 },
    ])
    expect(record).toEqual({
      created_at: '2026-01-01T00:00:00.000Z',
      service_id: 'svc-9',
      random_bucket: 42,
      external_id: 'ann',
      user_aliases: [{ alias_name: 'a-1', alias_label: 'crm' }],
      first_name: 'Ann',
      email: 'ann@example.com',
      country: 'NO',
      push_subscribe: 'unsubscribed',
      custom_attributes: { plan: 'pro' },
      custom_events: [{ name: 'login', first: '2026-01-02T00:00:00.000Z', last: '2026-01-03T00:00:00.000Z', count: 2 }],
      purchases: [{ name: 'sku', first: '2026-01-04T00:00:00.000Z', last: '2026-01-04T00:00:00.000Z', count: 1 }],
      push_tokens: [{ app: 'app', token: 't', notifications_enabled: false }],
    })
  })

  it('orders names by their UTF-8 bytes, as Postgres COLLATE "C" does', () => {
    expect(['é', 'z', 'Z', 'a'].sort(byteOrder)).toEqual(['Z', 'a', 'z', 'é'])
  })
})
