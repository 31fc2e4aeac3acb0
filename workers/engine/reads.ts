import type { Redis } from 'ioredis'
import type { ClickHouseReads } from '../../shared/clickhouse/reads.js'
import type { Filter } from '../../shared/domain/segment-filter.js'
import type { Logger } from '../../shared/logger.js'
import { ClickHouseReadRequest, clickhouseReadKeys, type ClickHouseReadReply } from '../../shared/queue/clickhouse-reads.js'
import { servePops, type Served } from './pop-loop.js'
import type { ReadPriority } from './priority.js'

/** Reads answered at once, side by side; more wait in the list. */
const MAX_IN_FLIGHT = 8

/** A request's answer as a reply carries it: a number or text (a map as JSON entries). */
async function read(reads: ClickHouseReads, request: ClickHouseReadRequest): Promise<number | string> {
  switch (request.op) {
    case 'segment_size':
      return reads.segmentSize(request.workspace_id, request.filter as Filter)
    case 'event_summaries':
      return JSON.stringify([...(await reads.eventSummaries(request.workspace_id, request.profile_ids))])
    case 'check':
      return reads.check()
  }
}

export type ReadServer = Served

/**
 * Serves the API's ClickHouse reads from the process holding the embedded engine
 * (`shared/queue/clickhouse-reads.ts`). It pops on a blocking connection of its own, so a read
 * never waits behind queued jobs; it shares only the event loop and the engine with them.
 */
export async function serveClickHouseReads(opts: {
  /** A connection this server blocks on; it is closed by `stop`. */
  blocking: Redis
  /** For the replies (a fail-fast connection: an answer Redis cannot take is lost, and the caller times out). */
  redis: Redis
  prefix: string
  reads: ClickHouseReads
  /** Holds new track and identity batches back while a read runs. */
  priority: Pick<ReadPriority, 'run'>
  logger: Logger
}): Promise<ReadServer> {
  const { blocking, redis, reads, priority, logger } = opts
  const keys = clickhouseReadKeys(opts.prefix)


  const answer = async (raw: Buffer) => {
    let request: ClickHouseReadRequest
    try {
      request = ClickHouseReadRequest.parse(JSON.parse(raw.toString('utf8')))
    } catch (e) {
      logger.warn({ err: (e as Error).message }, 'dropped a malformed ClickHouse read request')
      return
    }
    // Its caller has answered 503 already.
    if (Date.now() > request.deadline) return
    // The reply leaves before the held batches resume: sent after them, it waited behind their
    // first synchronous stretch (~20 ms a read while a backlog drains).
    await priority.run(async () => {
      let reply: ClickHouseReadReply
      try {
        const value = await read(reads, request)
        reply = { id: request.id, ok: true, value }
      } catch (e) {
        logger.error({ err: e, op: request.op }, 'ClickHouse read failed')
        reply = { id: request.id, ok: false, error: (e as Error).message }
      }
      await redis.publish(request.reply, JSON.stringify(reply)).catch(() => {})
    })
  }

  return servePops({ blocking, key: keys.requests, maxInFlight: MAX_IN_FLIGHT, handle: answer, logger, what: 'ClickHouse read channel' })
}
