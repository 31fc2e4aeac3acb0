import { describe, expect, it } from 'vitest'
import { identifierKey, partitionOf } from '../../../shared/domain/identifiers.js'

const PINNED = { externalId4: 2, externalId16: 6, email4: 2, alias16: 6 }

describe('track partition of a user', () => {
  it('never changes between versions: queued work of one user must stay on one partition across an upgrade', () => {
    // Pinned values of sha1(identifier key) mod n; a different hash would reorder users' queued work.
    expect(partitionOf({ kind: 'external_id', value: 'user-1' }, 4)).toBe(PINNED.externalId4)
    expect(partitionOf({ kind: 'external_id', value: 'user-1' }, 16)).toBe(PINNED.externalId16)
    expect(partitionOf({ kind: 'email', value: 'a@example.com' }, 4)).toBe(PINNED.email4)
    expect(partitionOf({ kind: 'user_alias', alias_label: 'device', alias_name: 'anon-1' }, 16)).toBe(PINNED.alias16)
  })

  it('names an alias by label and name, other identifiers by kind and value', () => {
    expect(identifierKey({ kind: 'user_alias', alias_label: 'device', alias_name: 'anon-1' })).toBe('user_alias:device\u0000anon-1')
    expect(identifierKey({ kind: 'phone', value: '+14155552671' })).toBe('phone:+14155552671')
  })
})
