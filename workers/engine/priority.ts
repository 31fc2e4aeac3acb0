/** Longest a batch waits for reads to finish: a stream of reads slows ingestion, never stops it. */
const MAX_YIELD_MS = 1_000

/**
 * Reads first, in the process holding the embedded engine: while one of the API's ClickHouse reads
 * runs, no new track or identity batch starts (batches already running finish), so the read has
 * the cores and the engine to itself instead of a share of them.
 */
export class ReadPriority {
  private active = 0
  private waiters: (() => void)[] = []

  async run<T>(read: () => Promise<T>): Promise<T> {
    this.begin()
    try {
      return await read()
    } finally {
      this.end()
    }
  }

  /** A read started (for reads run elsewhere, e.g. on the read server's thread, which say so). */
  begin(): void {
    this.active++
  }

  /** A read ended; after the last one, held batches go. */
  end(): void {
    if (this.active === 0 || --this.active > 0) return
    const waiters = this.waiters
    this.waiters = []
    for (const w of waiters) w()
  }

  /** Resolves at once when no read runs, else when the last one ends (at most MAX_YIELD_MS later). */
  yield(): Promise<void> {
    if (this.active === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, MAX_YIELD_MS)
      this.waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}
