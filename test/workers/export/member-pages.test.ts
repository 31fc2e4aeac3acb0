import { describe, expect, it } from 'vitest'
import { MemberPages } from '../../../workers/export/member-pages.js'

/** A deferred promise the test settles by hand. */
function deferred<T>() {
  let resolve!: (v: T) => void
  let reject!: (e: Error) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

const flush = () => new Promise((r) => setImmediate(r))

/** Members 1..total in pages: every read and enrichment waits until the test lets it finish. */
function segment(total: number) {
  const reads: { after: string; done: ReturnType<typeof deferred<{ profile_id: string }[]>> }[] = []
  const enrichments: { first: string; done: ReturnType<typeof deferred<void>> }[] = []
  const read = (after: string, limit: number) => {
    const done = deferred<{ profile_id: string }[]>()
    reads.push({ after, done })
    const start = Number(after)
    const ids = Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) => ({ profile_id: String(start + i + 1) }))
    return done.promise.then(() => ids)
  }
  const enrich = async (rows: { profile_id: string }[]) => {
    const done = deferred<void>()
    enrichments.push({ first: rows[0]?.profile_id ?? '-', done })
    await done.promise
    return rows.map((r) => `member ${r.profile_id}`)
  }
  return { reads, enrichments, read, enrich }
}

describe('MemberPages', () => {
  it('reads the next page while this one is enriched, and holds at most two pages beside the one written', async () => {
    const s = segment(10)
    const pages = new MemberPages(s.read, s.enrich, 2)
    expect(s.reads.map((r) => r.after)).toEqual(['0'])
    s.reads[0].done.resolve([])
    await flush()
    // Page 1 is being enriched, page 2 already read.
    expect(s.enrichments.map((e) => e.first)).toEqual(['1'])
    expect(s.reads.map((r) => r.after)).toEqual(['0', '2'])
    s.reads[1].done.resolve([])
    await flush()
    // Two pages pending (1 and 2): the third read waits until a page is taken.
    expect(s.reads.map((r) => r.after)).toEqual(['0', '2'])
    s.enrichments[0].done.resolve()
    const first = pages.take(2)
    expect((await first.next()).value).toBe('member 1')
    expect(s.reads.map((r) => r.after)).toEqual(['0', '2', '4'])
    expect((await first.next()).value).toBe('member 2')
  })

  it('yields every member once, in order, across pages and takes, and stops after a short page', async () => {
    const total = 7
    const reads: string[] = []
    const pages = new MemberPages(
      async (after: string, limit: number) => {
        reads.push(after)
        const start = Number(after)
        return Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) => ({ profile_id: String(start + i + 1) }))
      },
      async (rows: { profile_id: string }[]) => rows.map((r) => Number(r.profile_id)),
      3,
    )
    const seen: number[][] = []
    while (await pages.hasMore()) {
      const chunk: number[] = []
      for await (const m of pages.take(2)) chunk.push(m)
      seen.push(chunk)
    }
    expect(seen).toEqual([[1, 2], [3, 4], [5, 6], [7]])
    // Pages of 3 after 0, 3 and 6; the short page of one ends the reads.
    expect(reads).toEqual(['0', '3', '6'])
  })

  it('rejects with the failure of a page and leaves no unhandled rejection behind', async () => {
    const pages = new MemberPages(
      async (after: string) => {
        if (after !== '0') throw new Error('engine went away')
        return [{ profile_id: '1' }, { profile_id: '2' }]
      },
      async (rows: { profile_id: string }[]) => rows,
      2,
    )
    const got: string[] = []
    await expect(
      (async () => {
        while (await pages.hasMore()) for await (const m of pages.take(1)) got.push(m.profile_id)
      })(),
    ).rejects.toThrow('engine went away')
    expect(got).toEqual(['1', '2'])
  })
})
