import { Readable } from 'node:stream'
import type { Redis } from 'ioredis'
import type { ClickHouseSettings, EngineConnection } from '../../shared/clickhouse/client.js'
import type { Logger } from '../../shared/logger.js'
import { engineChannelKeys, frame, REPLY_TTL_SECONDS, unframe, type ReplyHeader, type StatementHeader } from '../../shared/queue/engine-channel.js'
import { servePops, type Served } from './pop-loop.js'

/** Statements run side by side, each on an engine connection of its own (one runs one at a time). */
const MAX_IN_FLIGHT = 8

/**
 * Runs the statements engine-less worker processes send (`shared/queue/engine-channel.ts`) on the
 * engine this process holds, and sends each result back. A statement framed for another seat (a
 * holder that died) or past its deadline was given up by its caller and is dropped unrun.
 */
export function serveEngineStatements(opts: { blocking: Redis; redis: Redis; prefix: string; seat: string; connect: () => EngineConnection; logger: Logger }): Served {
  const { redis, logger } = opts
  const idle: EngineConnection[] = []
  const run = async (header: StatementHeader, body: Buffer): Promise<{ reply: Omit<ReplyHeader, 'id' | 'ok'>; bytes?: Buffer }> => {
    // Connections are kept: closing one of the engine's connections can hang the others (chdb).
    const connection = idle.pop() ?? opts.connect()
    try {
      const params = { query: header.query ?? '', query_params: header.query_params, clickhouse_settings: header.clickhouse_settings as ClickHouseSettings | undefined }
      switch (header.op) {
        case 'query':
          return { reply: {}, bytes: await bytesOf((await connection.query(params)).stream) }
        case 'exec': {
          const r = await connection.exec({ ...params, values: body.length ? Readable.from([body]) : undefined })
          return { reply: { summary: r.summary }, bytes: await bytesOf(r.stream) }
        }
        case 'command':
          return { reply: { summary: (await connection.command(params)).summary } }
        case 'insert':
          return { reply: { summary: (await connection.insert({ ...params, values: body.toString('utf8') })).summary } }
        case 'raw_insert':
          await connection.rawInsert({ table: header.table!, columns: header.columns!, settings: header.settings, body })
          return { reply: {} }
        case 'ping': {
          const p = await connection.ping({ select: true })
          if (!p.success) throw p.error
          return { reply: {} }
        }
      }
    } finally {
      idle.push(connection)
    }
  }
  const handle = async (raw: Buffer) => {
    const { header, body } = unframe<StatementHeader>(raw)
    if (header.seat !== opts.seat || Date.now() > header.deadline) return
    let reply: Buffer
    try {
      const { reply: r, bytes } = await run(header, body)
      reply = frame({ id: header.id, ok: true, ...r } satisfies ReplyHeader, bytes)
    } catch (e) {
      const err = e as { message?: string; code?: string; type?: string }
      logger.warn({ err: err.message, op: header.op, lane: header.lane }, 'a statement sent over the engine channel failed')
      reply = frame({ id: header.id, ok: false, error: { message: err.message ?? String(e), code: err.code, type: err.type } } satisfies ReplyHeader)
    }
    await redis
      .multi()
      .rpush(header.reply, reply)
      .expire(header.reply, REPLY_TTL_SECONDS)
      .exec()
      .catch((e) => logger.warn({ err: (e as Error).message }, 'a statement result could not be sent back (its caller retries)'))
  }
  return servePops({ blocking: opts.blocking, key: engineChannelKeys(opts.prefix).statements, maxInFlight: MAX_IN_FLIGHT, handle, logger, what: 'engine statement channel' })
}

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer))
  return Buffer.concat(chunks)
}
