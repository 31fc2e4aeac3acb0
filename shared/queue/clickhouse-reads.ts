import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { z } from 'zod'
import type { ClickHouseReads } from '../clickhouse/reads.js'
import type { Filter } from '../domain/segment-filter.js'
import type { KindedSummary } from '../domain/user-record.js'
import { UnavailableError } from '../errors.js'

/**
 * The read channel between API processes and the worker process holding the embedded ClickHouse
 * engine (one process may open it). A caller pushes a request onto one Redis list; the holder pops
 * it on a connection of its own, beside and never behind its queued jobs, runs the read and
 * publishes the answer on the caller's channel. The holder keeps a heartbeat key alive, so a
 * caller knows at once when nobody holds the engine, and a request that outlived its deadline is
 * dropped unread.
 */
export function clickhouseReadKeys(prefix: string) {
  return {
    requests: `${prefix}:clickhouse-reads:requests`,
    holder: `${prefix}:clickhouse-reads:holder`,
    reply: (caller: string) => `${prefix}:clickhouse-reads:reply:${caller}`,
  }
}

/** How long the holder's heartbeat lives unrenewed: a holder silent this long is taken as gone. */
export const HOLDER_HEARTBEAT_TTL_MS = 3_000

export const ClickHouseReadRequest = z.discriminatedUnion('op', [
  z.object({ op: z.literal('segment_size'), id: z.string(), reply: z.string(), deadline: z.number(), workspace_id: z.string(), filter: z.unknown() }),
  z.object({
    op: z.literal('event_summaries'),
    id: z.string(),
    reply: z.string(),
    deadline: z.number(),
    workspace_id: z.string(),
    profile_ids: z.array(z.number().int()),
  }),
  z.object({ op: z.literal('check'), id: z.string(), reply: z.string(), deadline: z.number() }),
])
export type ClickHouseReadRequest = z.infer<typeof ClickHouseReadRequest>

export const ClickHouseReadReply = z.union([
  z.object({ id: z.string(), ok: z.literal(true), value: z.union([z.number(), z.string()]) }),
  z.object({ id: z.string(), ok: z.literal(false), error: z.string() }),
])
export type ClickHouseReadReply = z.infer<typeof ClickHouseReadReply>

/** What the holder says of itself in its heartbeat. */
export interface HolderInfo {
  pid: number
  host: string
  /** One holding of the engine: a holder that dies and comes back is another seat. */
  seat?: string
  /** The holder's engine directory, on its host. */
  dataDir?: string
}

type Pending = { resolve(v: number | string): void; reject(e: Error): void; timer: NodeJS.Timeout }

/** ClickHouse reads of a process that does not hold the embedded engine: asked of the process that does. */
export class RemoteClickHouseReads implements ClickHouseReads {
  private readonly caller = randomUUID()
  private readonly keys
  private readonly pending = new Map<string, Pending>()

  private constructor(
    private readonly redis: Redis,
    private readonly subscriber: Redis,
    prefix: string,
    private readonly timeoutMs: number,
  ) {
    this.keys = clickhouseReadKeys(prefix)
  }

  /** `subscriber` becomes a subscriber connection: it is this object's alone. */
  static async connect(opts: { redis: Redis; subscriber: Redis; prefix: string; timeoutMs: number }): Promise<RemoteClickHouseReads> {
    const reads = new RemoteClickHouseReads(opts.redis, opts.subscriber, opts.prefix, opts.timeoutMs)
    opts.subscriber.on('message', (_channel: string, message: string) => reads.answered(message))
    await opts.subscriber.subscribe(reads.keys.reply(reads.caller))
    return reads
  }

  async segmentSize(workspaceId: string, filter: Filter): Promise<number> {
    return Number(await this.ask({ op: 'segment_size', workspace_id: workspaceId, filter }))
  }

  async eventSummaries(workspaceId: string, profileIds: number[]): Promise<Map<number, KindedSummary[]>> {
    const entries = JSON.parse(String(await this.ask({ op: 'event_summaries', workspace_id: workspaceId, profile_ids: profileIds }))) as [number, KindedSummary[]][]
    return new Map(entries)
  }

  async check(): Promise<string> {
    const holder = await this.holder()
    await this.ask({ op: 'check' })
    return `ok (embedded engine held by worker process ${holder.pid} on ${holder.host})`
  }

  async close(): Promise<void> {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer)
      p.reject(new UnavailableError('the service is shutting down'))
    }
    this.pending.clear()
    await this.subscriber.quit().catch(() => this.subscriber.disconnect())
  }

  private async holder(): Promise<HolderInfo> {
    let raw: string | null
    try {
      raw = await this.redis.get(this.keys.holder)
    } catch (e) {
      throw new UnavailableError(`ClickHouse cannot be asked: Redis is unavailable (${(e as Error).message})`)
    }
    if (!raw) {
      throw new UnavailableError(
        'ClickHouse is unavailable: no worker process holds the embedded engine (start the worker, `npm run start:worker`, or set CLICKHOUSE_URL)',
      )
    }
    return JSON.parse(raw) as HolderInfo
  }

  private async ask(
    body: { op: 'segment_size'; workspace_id: string; filter: Filter } | { op: 'event_summaries'; workspace_id: string; profile_ids: number[] } | { op: 'check' },
  ): Promise<number | string> {
    const holder = await this.holder()
    const id = randomUUID()
    const request = { ...body, id, reply: this.keys.reply(this.caller), deadline: Date.now() + this.timeoutMs }
    const answer = new Promise<number | string>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id)
        reject(
          new UnavailableError(
            `ClickHouse is unavailable: the worker process holding the embedded engine (pid ${holder.pid} on ${holder.host}) did not answer within ${this.timeoutMs / 1000} s`,
          ),
        )
      }, this.timeoutMs)
      this.pending.set(id, { resolve, reject, timer })
    })
    try {
      await this.redis.rpush(this.keys.requests, JSON.stringify(request))
    } catch (e) {
      const p = this.pending.get(id)
      if (p) clearTimeout(p.timer)
      this.pending.delete(id)
      throw new UnavailableError(`ClickHouse cannot be asked: Redis is unavailable (${(e as Error).message})`)
    }
    return answer
  }

  private answered(message: string) {
    const parsed = ClickHouseReadReply.safeParse(JSON.parse(message))
    if (!parsed.success) return
    const reply = parsed.data
    const p = this.pending.get(reply.id)
    if (!p) return
    this.pending.delete(reply.id)
    clearTimeout(p.timer)
    if (reply.ok) p.resolve(reply.value)
    else p.reject(new Error(`ClickHouse read failed in the worker process: ${reply.error}`))
  }
}
