import { describe, expect, it } from 'vitest'
import { ReadPriority } from '../../../workers/engine/priority.js'

describe('ReadPriority', () => {
  it('lets a batch start at once when no read runs', async () => {
    const p = new ReadPriority()
    let started = false
    await p.yield().then(() => (started = true))
    expect(started).toBe(true)
  })

  it('holds a batch until the last running read ends', async () => {
    const p = new ReadPriority()
    const order: string[] = []
    let endFirst!: () => void
    let endSecond!: () => void
    const first = p.run(() => new Promise<void>((r) => (endFirst = r)).then(() => order.push('read 1')))
    const second = p.run(() => new Promise<void>((r) => (endSecond = r)).then(() => order.push('read 2')))
    const batch = p.yield().then(() => order.push('batch'))
    endFirst()
    await first
    await new Promise((r) => setTimeout(r, 10))
    expect(order).toEqual(['read 1'])
    endSecond()
    await Promise.all([second, batch])
    expect(order).toEqual(['read 1', 'read 2', 'batch'])
  })

  it('lets a batch go after a bounded wait, however long reads run', async () => {
    const p = new ReadPriority()
    void p.run(() => new Promise(() => {}))
    const t = Date.now()
    await p.yield()
    expect(Date.now() - t).toBeGreaterThanOrEqual(900)
  })
})
