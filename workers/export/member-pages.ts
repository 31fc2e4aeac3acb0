/** Reads the members after the keyset cursor `after` (a profile id), at most `limit`, in profile id order. */
export type PageReader<T> = (after: string, limit: number) => Promise<T[]>

/**
 * Segment members in profile id order, read in keyset pages. The next page is fetched while the
 * current one is written out (the engine works on its own threads), and at most these two pages
 * are held: the export's memory stays bounded by the page size whatever the segment's size.
 */
export class MemberPages<T extends { profile_id: string }> {
  private page: T[] = []
  private position = 0
  private next: Promise<T[]> | undefined

  constructor(private readonly read: PageReader<T>, private readonly pageSize: number) {
    this.next = this.fetch('0')
  }

  async hasMore(): Promise<boolean> {
    if (this.position < this.page.length) return true
    if (!this.next) return false
    this.page = await this.next
    this.position = 0
    // A short page is the last one: no query just to learn that nothing follows.
    const full = this.page.length === this.pageSize
    this.next = full ? this.fetch(this.page[this.page.length - 1].profile_id) : undefined
    return this.page.length > 0
  }

  /** The next `n` members (fewer at the end), fetching pages as they are consumed. */
  async *take(n: number): AsyncGenerator<T> {
    for (let taken = 0; taken < n && (await this.hasMore()); taken++) yield this.page[this.position++]
  }

  private fetch(after: string): Promise<T[]> {
    const pending = this.read(after, this.pageSize)
    // A prefetch nobody awaits (the export stopped on another error) must not become an unhandled rejection.
    pending.catch(() => {})
    return pending
  }
}
