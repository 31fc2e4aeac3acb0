import type { Redis } from 'ioredis'
import type { Logger } from '../../shared/logger.js'

/** How long one pop waits for a request before looking whether it should stop. */
const POP_WAIT_SECONDS = 1

export interface Served {
  stop(): Promise<void>
}

/**
 * Pops requests off one Redis list on a blocking connection of its own (so a request never waits
 * behind queued jobs) and handles up to `maxInFlight` side by side; more wait in the list.
 */
export function servePops(opts: { blocking: Redis; key: string; maxInFlight: number; handle: (raw: Buffer) => Promise<void>; logger: Logger; what: string }): Served {
  const { blocking, logger } = opts
  const inFlight = new Set<Promise<void>>()
  let stopping = false
  const loop = (async () => {
    while (!stopping) {
      if (inFlight.size >= opts.maxInFlight) {
        await Promise.race(inFlight)
        continue
      }
      let popped: [Buffer, Buffer] | null
      try {
        popped = (await blocking.blpopBuffer(opts.key, POP_WAIT_SECONDS)) as [Buffer, Buffer] | null
      } catch (e) {
        if (stopping) break
        logger.warn({ err: (e as Error).message }, `${opts.what}: Redis unavailable; retrying`)
        await new Promise((r) => setTimeout(r, 500))
        continue
      }
      if (!popped) continue
      const p = opts.handle(popped[1]).finally(() => inFlight.delete(p))
      inFlight.add(p)
    }
  })()
  return {
    async stop() {
      stopping = true
      await loop
      await Promise.all(inFlight)
      blocking.disconnect()
    },
  }
}
