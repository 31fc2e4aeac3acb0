/** Reads the members after the keyset cursor `after` (a profile id), at most `limit`, in profile id order. */
export type PageReader<R> = (after: string, limit: number) => Promise<R[]>

/** Completes a page read (for an export: the members' summaries from the event history). */
export type PageEnricher<R, T> = (rows: R[]) => Promise<T[]>

/** Pages read or being read beyond the one being written out. */
const AHEAD = 2

/**
 * Segment members in profile id order, read in keyset pages. A page is read, then enriched; the
 * next page's read starts as soon as this page's read returns its last id, so it runs beside this
 * page's enrichment and beside the writing of the pages before it (the engine works on its own
 * threads). At most AHEAD pages are held beside the one being written: the export's memory stays
 * bounded by the page size whatever the segment's size.
 */
export class MemberPages<R extends { profile_id: string }, T> {
  private page: T[] = []
  private position = 0
  private readonly pending: Promise<T[]>[] = []
  /** The cursor of a read held back because AHEAD pages were pending (no read runs meanwhile). */
  private heldAfter: string | undefined

  constructor(
    private readonly read: PageReader<R>,
    private readonly enrich: PageEnricher<R, T>,
    private readonly pageSize: number,
  ) {
    this.fetch('0')
  }

  async hasMore(): Promise<boolean> {
    if (this.position < this.page.length) return true
    const next = this.pending.shift()
    if (!next) return false
    this.page = await next
    this.position = 0
    if (this.heldAfter !== undefined) {
      const after = this.heldAfter
      this.heldAfter = undefined
      this.fetch(after)
    }
    return this.page.length > 0
  }

  /** The next `n` members (fewer at the end), fetching pages as they are consumed. */
  async *take(n: number): AsyncGenerator<T> {
    for (let taken = 0; taken < n && (await this.hasMore()); taken++) yield this.page[this.position++]
  }

  private fetch(after: string): void {
    const rows = this.read(after, this.pageSize)
    const page = rows.then((r) => this.enrich(r))
    // A page nobody awaits (the export stopped on another error) must not become an unhandled rejection.
    page.catch(() => {})
    this.pending.push(page)
    rows.then(
      (r) => {
        // A short page is the last one: no query just to learn that nothing follows.
        if (r.length < this.pageSize) return
        const last = r[r.length - 1].profile_id
        if (this.pending.length < AHEAD) this.fetch(last)
        else this.heldAfter = last
      },
      // The failure reaches the export through `page`.
      () => {},
    )
  }
}
