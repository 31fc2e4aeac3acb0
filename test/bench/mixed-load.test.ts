import { describe, expect, it } from 'vitest'
import { FIRST_NEW_USER, phoneOf, preloadedExternalIds, setupBodies } from '../../bench/mixed-load.js'

const setupObjects = (gone?: Set<string>) => setupBodies(gone).flatMap((b) => (JSON.parse(b) as { attributes: Record<string, unknown>[] }).attributes)
const byExternalId = (objects: Record<string, unknown>[]) => new Map(objects.filter((o) => o.external_id).map((o) => [o.external_id as string, o]))

describe('the mixed load set-up', () => {
  it('names the preloaded profile of every existing user not named by alias', () => {
    const ids = preloadedExternalIds()
    // Users u % 20 of 14 and 15 are alias users: a tenth of the existing ones.
    expect(ids).toHaveLength(FIRST_NEW_USER * 0.9)
    expect(ids).toContain('p1')
    expect(ids).toContain('p20')
    expect(ids).not.toContain('p15')
  })

  it('leaves present profiles alone but for the phone users’ phones', () => {
    const objects = byExternalId(setupObjects())
    expect(objects.get('p20')).toEqual({ external_id: 'p20', phone: phoneOf(19) })
    expect(objects.has('p1')).toBe(false)
    expect(objects.has('p17')).toBe(false)
  })

  it('makes again, as the preload had them, the profiles an earlier part took', () => {
    const objects = byExternalId(setupObjects(new Set(['p1', 'p17', 'p20'])))
    expect(objects.get('p1')).toEqual({ external_id: 'p1', email: 'p1@example.com' })
    expect(objects.get('p17')).toEqual({ external_id: 'p17', email: 'p17@example.com' })
    expect(objects.get('p20')).toEqual({ external_id: 'p20', email: 'p20@example.com', phone: phoneOf(19) })
    expect(objects.has('p2')).toBe(false)
    expect(objects.get('p19')).toEqual({ external_id: 'p19', phone: phoneOf(18) })
  })
})
