import { randomUUID } from 'node:crypto'
import { Readable } from 'node:stream'
import type { Redis } from 'ioredis'
import { ClickHouseError } from '@clickhouse/client'
import type { EngineConnection, StatementSummary, TabSeparatedInsert } from '../clickhouse/client.js'
import { RetryableError } from '../errors.js'
import { redisScript } from '../redis-script.js'
import { clickhouseReadKeys, type HolderInfo } from './clickhouse-reads.js'

/**
 * The statement channel to the embedded engine: a worker process that does not hold the engine
 * (another host, or a second process on the holder's host) sends each ClickHouse statement over
 * Redis to the process that does, which runs it on the engine and sends the result back. The SQL is
 * the same as on the engine itself; only the transport differs. Requests name the seat (one holding
 * of the engine) they were sent to, so a successor never runs what was meant for a holder that died.
 */
export function engineChannelKeys(prefix: string) {
  return {
    statements: `${prefix}:engine:statements`,
    reply: (caller: string) => `${prefix}:engine:reply:${caller}`,
    holder: clickhouseReadKeys(prefix).holder,
  }
}

export type StatementOp = 'query' | 'exec' | 'command' | 'insert' | 'raw_insert' | 'ping'

/** A statement as it travels: this header as JSON, a newline, then the body (insert values). */
export interface StatementHeader {
  id: string
  reply: string
  seat: string
  deadline: number
  lane: string
  op: StatementOp
  query?: string
  query_params?: Record<string, unknown>
  clickhouse_settings?: Record<string, unknown>
  /** raw_insert only */
  table?: string
  columns?: readonly string[]
  settings?: Record<string, string | number | boolean>
}

export interface ReplyHeader {
  id: string
  ok: boolean
  error?: { message: string; code?: string; type?: string }
  summary?: StatementSummary
}

/** Header and body as one buffer (the body may hold any bytes, the header none of them a newline). */
export function frame(header: object, body: Buffer = EMPTY): Buffer {
  return Buffer.concat([Buffer.from(JSON.stringify(header)), NEWLINE, body])
}

export function unframe<H>(buf: Buffer): { header: H; body: Buffer } {
  const end = buf.indexOf(NEWLINE_BYTE)
  return { header: JSON.parse(buf.subarray(0, end).toString('utf8')) as H, body: buf.subarray(end + 1) }
}

const NEWLINE_BYTE = 0x0a
const NEWLINE = Buffer.from([NEWLINE_BYTE])
const EMPTY = Buffer.alloc(0)

/** Longest a statement may run (a server's request timeout, the same here). */
const STATEMENT_TIMEOUT_MS = 300_000
/** How often a caller looks whether the holder it waits on is still the holder. */
const HOLDER_WATCH_MS = 1_000
/** A reply waits this long for a caller that may have died meanwhile. */
export const REPLY_TTL_SECONDS = 60

/** KEYS: holder, statements. ARGV: the holder value the request was framed for, the request. Sends only to that holder. */
const SEND = `
local h = redis.call('GET', KEYS[1])
if h ~= ARGV[1] then return h or false end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1`
const sendScript = redisScript(SEND)

type Pending = { resolve(r: { header: ReplyHeader; body: Buffer }): void; reject(e: Error): void; seat: string; timer: NodeJS.Timeout }

/** The engine is not reachable now; ordered work retries in place, reads answer 503. */
export class EngineUnavailableError extends RetryableError {}

/**
 * One process's end of the statement channel: its reply list, popped on a connection of its own,
 * and a watch on the holder so that statements sent to a holder that went away fail at once
 * (retryably) instead of at their deadline.
 */
export class EngineChannel {
  readonly caller = randomUUID()
  private readonly keys
  private readonly pending = new Map<string, Pending>()
  private holder: string | null = null
  private closed = false
  private readonly loop: Promise<void>
  private readonly watch: NodeJS.Timeout

  constructor(
    private readonly redis: Redis,
    /** Becomes this channel's blocking connection. */
    private readonly blocking: Redis,
    prefix: string,
  ) {
    this.keys = engineChannelKeys(prefix)
    this.loop = this.receive()
    this.watch = setInterval(() => void this.lookAtHolder(), HOLDER_WATCH_MS)
    this.watch.unref()
  }

  /** The holder as its heartbeat says, if any. */
  async currentHolder(): Promise<HolderInfo | undefined> {
    await this.lookAtHolder()
    return this.holder ? (JSON.parse(this.holder) as HolderInfo) : undefined
  }

  async send(header: Omit<StatementHeader, 'id' | 'reply' | 'seat' | 'deadline'>, body?: Buffer): Promise<{ header: ReplyHeader; body: Buffer }> {
    if (this.closed) throw new EngineUnavailableError('the engine channel is closed')
    if (!this.holder) await this.lookAtHolder()
    // A holder that changed since we last looked gets the statement framed again, once.
    for (let attempt = 0; attempt < 2; attempt++) {
      const holder = this.holder
      if (!holder) break
      const id = randomUUID()
      const request = frame(
        { ...header, id, reply: this.keys.reply(this.caller), seat: (JSON.parse(holder) as HolderInfo).seat ?? '', deadline: Date.now() + STATEMENT_TIMEOUT_MS } satisfies StatementHeader,
        body,
      )
      const answer = new Promise<{ header: ReplyHeader; body: Buffer }>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.pending.delete(id)
          reject(new EngineUnavailableError(`ClickHouse is unavailable: the worker process holding the embedded engine did not answer within ${STATEMENT_TIMEOUT_MS / 1000} s`))
        }, STATEMENT_TIMEOUT_MS + 1_000)
        this.pending.set(id, { resolve, reject, seat: holder, timer })
      })
      let sent: unknown
      try {
        sent = await sendScript(this.redis, [this.keys.holder, this.keys.statements], [holder, request])
      } catch (e) {
        this.settle(id)
        throw new EngineUnavailableError(`ClickHouse cannot be reached: Redis is unavailable (${(e as Error).message})`)
      }
      if (sent === 1) return answer
      this.settle(id)
      this.holder = (sent as string | null) || null
    }
    throw new EngineUnavailableError('ClickHouse is unavailable: no worker process holds the embedded engine (start a worker on the host whose DATA_DIR holds it)')
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.watch)
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer)
      p.reject(new EngineUnavailableError('the service is shutting down'))
      this.pending.delete(id)
    }
    this.blocking.disconnect()
    await this.loop
  }

  private settle(id: string): Pending | undefined {
    const p = this.pending.get(id)
    if (p) {
      clearTimeout(p.timer)
      this.pending.delete(id)
    }
    return p
  }

  private async lookAtHolder(): Promise<void> {
    let now: string | null
    try {
      now = await this.redis.get(this.keys.holder)
    } catch {
      return
    }
    this.holder = now
    // Statements sent to a holding that ended are lost with it: their callers retry.
    for (const [id, p] of this.pending) {
      if (p.seat === now) continue
      this.settle(id)
      p.reject(new EngineUnavailableError('ClickHouse is unavailable: the worker process holding the embedded engine went away'))
    }
  }

  private async receive(): Promise<void> {
    const key = this.keys.reply(this.caller)
    while (!this.closed) {
      let popped: [Buffer, Buffer] | null
      try {
        popped = (await this.blocking.blpopBuffer(key, 1)) as [Buffer, Buffer] | null
      } catch {
        if (this.closed) return
        await new Promise((r) => setTimeout(r, 200))
        continue
      }
      if (!popped) continue
      const reply = unframe<ReplyHeader>(popped[1])
      this.settle(reply.header.id)?.resolve(reply)
    }
  }
}

/** A lane of the channel as `@clickhouse/client` sees a connection (and the raw insert of ClickHouse's interface). */
export function channelConnection(channel: EngineChannel, lane: string): EngineConnection {
  const run = async (op: StatementOp, params: { query?: string; query_params?: Record<string, unknown>; clickhouse_settings?: Record<string, unknown>; query_id?: string }, body?: Buffer) => {
    const reply = await channel.send({ lane, op, query: params.query, query_params: params.query_params, clickhouse_settings: params.clickhouse_settings }, body)
    if (!reply.header.ok) throw engineError(reply.header.error!)
    return { reply, base: { query_id: params.query_id ?? reply.header.id, response_headers: {}, http_status_code: 200 } }
  }
  return {
    async query(params) {
      const { reply, base } = await run('query', params)
      return { ...base, stream: readable(reply.body) }
    },
    async exec(params) {
      const { reply, base } = await run('exec', params, params.values ? await bytesOf(params.values) : undefined)
      return { ...base, stream: readable(reply.body), summary: reply.header.summary! }
    },
    async command(params) {
      const { reply, base } = await run('command', params)
      return { ...base, summary: reply.header.summary! }
    },
    async insert(params) {
      const { reply, base } = await run('insert', params, await bytesOf(params.values))
      return { ...base, summary: reply.header.summary! }
    },
    async ping() {
      try {
        await run('ping', {})
        return { success: true }
      } catch (e) {
        return { success: false, error: e as Error }
      }
    },
    async close() {},
    async rawInsert({ table, columns, settings, body }: TabSeparatedInsert) {
      const reply = await channel.send({ lane, op: 'raw_insert', table, columns, settings }, typeof body === 'string' ? Buffer.from(body) : body)
      if (!reply.header.ok) throw engineError(reply.header.error!)
    },
  }
}

function engineError(e: NonNullable<ReplyHeader['error']>): Error {
  return e.code ? new ClickHouseError({ message: e.message, code: e.code, type: e.type }) : new Error(e.message)
}

function readable(body: Buffer): Readable {
  const r = Readable.from([body], { objectMode: false })
  // As the engine's own connection: a result closed unread must not raise an unhandled error.
  r.on('error', () => {})
  return r
}

async function bytesOf(values: string | Readable): Promise<Buffer> {
  if (typeof values === 'string') return Buffer.from(values)
  const chunks: Buffer[] = []
  for await (const chunk of values) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array))
  return Buffer.concat(chunks)
}
