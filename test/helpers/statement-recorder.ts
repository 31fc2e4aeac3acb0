import { createHash } from 'node:crypto'
import type { ClickHouse } from '../../shared/clickhouse/client.js'
import type { ShimStatement } from './clickhouse-shim.js'

/**
 * A statement in the form a server receives it, for comparing what the embedded engine ran with
 * what the server path sent: its text as the client sends it (a read with the client's
 * ` \nFORMAT x` appended), its parameters in the client's text form, its settings as text, and an
 * insert's rows by hash.
 */
export interface SentStatement {
  sql: string
  params: Record<string, string>
  settings: Record<string, string>
  rowsSha1?: string
}

/**
 * A copy of `ch` that records every statement its client runs and every insert it makes (the
 * embedded side of a comparison; the server side is the shim's record, `asSent`).
 */
export function recordingClickHouse(ch: ClickHouse): { ch: ClickHouse; sent: SentStatement[] } {
  const sent: SentStatement[] = []
  const c = ch.client
  type Params = { query: string; format?: string; query_params?: Record<string, unknown>; clickhouse_settings?: Record<string, unknown> }
  const record = (p: Params, sql: string) => sent.push({ sql, params: paramTexts(p.query_params), settings: settingTexts(p.clickhouse_settings) })
  const wrapped: Record<string, (p: Params) => unknown> = {
    query: (p) => (record(p, `${p.query.trim()} \nFORMAT ${p.format ?? 'JSON'}`), c.query(p as never)),
    command: (p) => (record(p, p.query), c.command(p as never)),
    exec: (p) => (record(p, p.query), c.exec(p as never)),
  }
  const client = new Proxy(c, {
    get(target, prop) {
      if (typeof prop === 'string' && prop in wrapped) return wrapped[prop]
      const v = Reflect.get(target, prop, target)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
  const recorded: ClickHouse = {
    ...ch,
    client,
    insertTabSeparated: (insert) => {
      const body = typeof insert.body === 'string' ? Buffer.from(insert.body) : insert.body
      sent.push({
        sql: `INSERT INTO ${insert.table} (${insert.columns.join(', ')}) FORMAT TabSeparated`,
        params: {},
        settings: settingTexts(insert.settings),
        rowsSha1: createHash('sha1').update(body).digest('hex'),
      })
      return ch.insertTabSeparated(insert)
    },
  }
  return { ch: recorded, sent }
}

/** Settings the server transport adds to every request (client.ts), about the HTTP exchange, not the statement. */
const TRANSPORT_SETTINGS = new Set(['send_progress_in_http_headers', 'http_headers_progress_interval_ms'])

/** The shim's record of a request as a SentStatement. */
export function asSent(s: ShimStatement): SentStatement {
  const settings = Object.fromEntries(Object.entries(s.settings).filter(([k]) => !TRANSPORT_SETTINGS.has(k)))
  return { sql: s.sql, params: s.params, settings, ...(s.rowsSha1 ? { rowsSha1: s.rowsSha1 } : {}) }
}

/** Runs of one statement repeated (a poll answered "not yet" a varying number of times) as one. */
export function withoutRepeats(statements: SentStatement[]): SentStatement[] {
  return statements.filter((s, i) => i === 0 || JSON.stringify(s) !== JSON.stringify(statements[i - 1]))
}

function settingTexts(settings: Record<string, unknown> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(settings ?? {}).map(([k, v]) => [k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]))
}

function paramTexts(params: Record<string, unknown> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(params ?? {}).map(([k, v]) => [k, paramText(v, false)]))
}

/** A parameter value as @clickhouse/client writes it (formatQueryParams), for the types the service binds. */
function paramText(v: unknown, inArray: boolean): string {
  if (typeof v === 'number' || typeof v === 'bigint') return String(v)
  if (typeof v === 'string') {
    const escaped = v.replace(/[\t\n\r'\\]/g, (c) => ({ '\t': '\\t', '\n': '\\n', '\r': '\\r', "'": "\\'", '\\': '\\\\' })[c]!)
    return inArray ? `'${escaped}'` : escaped
  }
  if (Array.isArray(v)) return `[${v.map((x) => paramText(x, true)).join(',')}]`
  throw new Error(`no text form for parameter ${JSON.stringify(v)}`)
}
