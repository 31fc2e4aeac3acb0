import { describe, expect, it } from 'vitest'
import { sharingAnAddress, withLastOccurrences } from '../../../shared/domain/prioritization.js'

describe('the recency prioritization reads', () => {
  it('names only the profiles sharing an email or a phone with another', () => {
    const profiles = [
      { id: 1, email: 'a@example.com', phone: null },
      { id: 2, email: 'a@example.com', phone: '+4711111111' },
      { id: 3, email: 'b@example.com', phone: '+4711111111' },
      { id: 4, email: 'c@example.com', phone: '+4722222222' },
      { id: 5, email: null, phone: null },
    ]
    expect(sharingAnAddress(profiles).sort()).toEqual([1, 2, 3])
    expect(sharingAnAddress([profiles[0]])).toEqual([])
    // Only the holders of addresses an identifier names: none named, none read.
    expect(sharingAnAddress(profiles, { emails: ['a@example.com'], phones: [] }).sort()).toEqual([1, 2])
    expect(sharingAnAddress(profiles, { emails: ['c@example.com'], phones: ['+4711111111'] }).sort()).toEqual([2, 3])
    expect(sharingAnAddress(profiles, { emails: [], phones: [] })).toEqual([])
  })

  it('takes the later of a profile’s own update and its last applied event or purchase', () => {
    const profiles = [
      { id: 1, updated_at: '2026-03-01T00:00:00.000Z' },
      { id: 2, updated_at: '2026-03-01T00:00:00.000Z' },
      { id: 3, updated_at: '2026-03-01T00:00:00.000Z' },
    ]
    const occurred = new Map([
      [1, '2026-04-01T00:00:00.000Z'],
      [2, '2026-02-01T00:00:00.000Z'],
    ])
    expect(withLastOccurrences(profiles, occurred).map((p) => p.updated_at)).toEqual([
      '2026-04-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
    ])
  })
})
