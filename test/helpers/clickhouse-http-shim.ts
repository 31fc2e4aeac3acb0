// A stand-in for a ClickHouse server's HTTP interface, for tests only: NOT a server. It speaks the
// subset of the protocol @clickhouse/client uses (POST / with settings and param_* in the URL, or
// the query and its param_* parts in a multipart/form-data body; inserts with the statement in the
// URL and the rows in the body; GET /ping) and runs each statement on a chDB engine of this
// process, in a session of its own (a server's settings last one request). What a server does and
// the shim imitates: `version()` answers the version it was started with; a URI past 1 MiB is
// refused (http_max_uri_size); a MergeTree setting newer than that version is refused as unknown;
// in a multipart request, URL settings ending in _format, _types or _structure are ignored
// (ClickHouse issue 85847). No cluster, no replication, no authentication.
// Usage: tsx clickhouse-http-shim.ts <dataDir> <version>; prints {"port": N} once listening.
// GET /shim/statements answers every request it received, GET /shim/most-at-once the most statements
// it ran at once; POST /shim/reset forgets both.
import { createHash } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createChdbConnection } from 'chdb/connection'
import { versionAtLeast } from '../../shared/clickhouse/server.js'

const [dataDir, version] = process.argv.slice(2)
/** Holds the engine up between requests (each request opens and closes a session of its own). */
const anchor = createChdbConnection({ path: dataDir })

const MAX_URI_SIZE = 1024 * 1024
/** URL parameters that are the HTTP interface's own, not settings. */
const NOT_SETTINGS = new Set([
  'query', 'database', 'default_format', 'query_id', 'session_id', 'session_timeout', 'session_check', 'compress', 'decompress',
  'user', 'password', 'quota_key', 'stacktrace', 'buffer_size', 'wait_end_of_query', 'client_protocol_version', 'close_session', 'role',
])
/** Settings the stated version must have for a statement naming them to run: the release that added each. */
const INTRODUCED_IN: Record<string, string> = { merge_selector_base: '24.11' }

/** One request as the shim received it. */
export interface ShimStatement {
  /** The statement text: the body, the `query` URL parameter or multipart part (an insert's, without its rows). */
  sql: string
  settings: Record<string, string>
  /** Query parameters as sent (the client's text form). */
  params: Record<string, string>
  /** Parameters (and the query) came in a multipart/form-data body. */
  multipart: boolean
  /** The names of parameters that came in the URL. */
  urlParams: string[]
  uriLength: number
  /** sha1 of an insert's rows. */
  rowsSha1?: string
  /** Why the shim refused it (as a server would), if it did. */
  refused?: string
}

const received: ShimStatement[] = []
/** Statements running now, and the most that ever ran at once (a client's connection pool bounds it). */
let running = 0
let mostAtOnce = 0

// Node's own limit on a request's head (16 KiB) would refuse long URLs before the server's rule above could.
const server = http.createServer({ maxHeaderSize: 4 * MAX_URI_SIZE }, (req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    handle(req, Buffer.concat(chunks)).then(
      ({ status, body, headers }) => {
        res.writeHead(status, { 'Content-Type': 'text/plain; charset=UTF-8', ...headers })
        res.end(body)
      },
      (e) => {
        res.writeHead(500)
        res.end(`shim failure: ${(e as Error).message}`)
      },
    )
  })
})

interface Reply {
  status: number
  body: Buffer | string
  headers?: Record<string, string>
}

async function handle(req: http.IncomingMessage, body: Buffer): Promise<Reply> {
  const rawUrl = req.url ?? '/'
  if (rawUrl === '/shim/statements') return { status: 200, body: JSON.stringify(received), headers: { 'Content-Type': 'application/json' } }
  if (rawUrl === '/shim/most-at-once') return { status: 200, body: String(mostAtOnce) }
  if (rawUrl === '/shim/reset') {
    received.length = 0
    mostAtOnce = running
    return { status: 200, body: 'ok' }
  }
  if (rawUrl.startsWith('/ping')) return { status: 200, body: 'Ok.\n' }
  const url = new URL(rawUrl, 'http://shim')
  const multipart = /^multipart\/form-data/.test(req.headers['content-type'] ?? '')
  const statement: ShimStatement = { sql: '', settings: {}, params: {}, multipart, urlParams: [], uriLength: rawUrl.length }
  received.push(statement)
  if (rawUrl.length > MAX_URI_SIZE) {
    statement.refused = 'URI longer than http_max_uri_size'
    return { status: 400, body: 'HTTP request URI exceeds the maximum allowed size (http_max_uri_size)\n' }
  }
  for (const [k, v] of url.searchParams) {
    if (k.startsWith('param_')) {
      statement.params[k.slice('param_'.length)] = v
      statement.urlParams.push(k.slice('param_'.length))
    } else if (!NOT_SETTINGS.has(k) && !(multipart && /(_format|_types|_structure)$/.test(k))) statement.settings[k] = v
  }
  let rows: string | undefined
  if (multipart) {
    const parts = multipartParts(body, req.headers['content-type']!)
    for (const [name, value] of parts) {
      if (name === 'query') statement.sql += value
      else if (name.startsWith('param_')) statement.params[name.slice('param_'.length)] = value
    }
  } else if (url.searchParams.has('query')) {
    statement.sql = url.searchParams.get('query')!
    rows = body.toString('utf8')
    statement.rowsSha1 = createHash('sha1').update(body).digest('hex')
  } else {
    statement.sql = body.toString('utf8')
  }
  for (const [setting, since] of Object.entries(INTRODUCED_IN)) {
    if (statement.sql.includes(setting) && !versionAtLeast(version, since)) {
      statement.refused = `${setting} is newer than ${version}`
      return failure(115, `Unknown setting '${setting}'`, 'UNKNOWN_SETTING')
    }
  }
  const sql = statement.sql.replace(/\bversion\(\)/g, `'${version}'`)
  const session = createChdbConnection({ path: dataDir })
  mostAtOnce = Math.max(mostAtOnce, ++running)
  try {
    const result = await session.exec({
      query: rows === undefined ? sql : `${sql}\n${rows}`,
      query_params: boundValues(sql, statement.params),
      clickhouse_settings: statement.settings,
    })
    const chunks: Buffer[] = []
    for await (const c of result.stream) chunks.push(Buffer.from(c as Buffer))
    return { status: 200, body: Buffer.concat(chunks), headers: { 'X-ClickHouse-Summary': JSON.stringify(result.summary ?? {}), 'X-ClickHouse-Query-Id': result.query_id } }
  } catch (e) {
    const err = e as { code?: string; type?: string; message: string }
    return failure(Number(err.code ?? 1000), err.message.replace(/\s*$/, ''), err.type ?? 'UNKNOWN_EXCEPTION')
  } finally {
    running--
    await session.close()
  }
}

/** An error as a server writes it, which the client parses back into code, message and type. */
function failure(code: number, message: string, type: string): Reply {
  return { status: 500, body: `Code: ${code}. DB::Exception: ${message} (${type}) (version ${version} (shim))\n`, headers: { 'X-ClickHouse-Exception-Code': String(code) } }
}

function multipartParts(body: Buffer, contentType: string): [string, string][] {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType)
  if (!boundary) throw new Error('multipart body without a boundary')
  const delimiter = `--${boundary[1] ?? boundary[2]}`
  const parts: [string, string][] = []
  for (const piece of body.toString('utf8').split(delimiter).slice(1)) {
    if (piece.startsWith('--')) break
    const headerEnd = piece.indexOf('\r\n\r\n')
    const name = /name="([^"]+)"/.exec(piece.slice(0, headerEnd))?.[1]
    if (name) parts.push([name, piece.slice(headerEnd + 4).replace(/\r\n$/, '')])
  }
  return parts
}

/**
 * The parameters as values for chDB's binder, which writes them back in the text form a server
 * reads (the client's, up to an escaped quote): decoded by the type each has in the statement.
 */
function boundValues(sql: string, params: Record<string, string>): Record<string, unknown> {
  const types = new Map([...sql.matchAll(/\{(\w+):([\w()]+)\}/g)].map((m) => [m[1], m[2]]))
  const out: Record<string, unknown> = {}
  for (const [name, text] of Object.entries(params)) {
    const type = types.get(name)
    // A server ignores a parameter the statement does not name.
    if (type === undefined) continue
    if (type === 'String') out[name] = unescapeText(text)
    else if (/^(U?Int\d+|Float64)$/.test(type ?? '')) out[name] = text
    else if (/^Array\((U?Int\d+|Float64)\)$/.test(type ?? '')) out[name] = JSON.parse(text)
    else if (type === 'Array(String)') out[name] = quotedStrings(text)
    else throw new Error(`the shim cannot bind parameter ${name} of type ${type}`)
  }
  return out
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '0': '\0', b: '\b', f: '\f' }
const unescapeText = (t: string) => t.replace(/\\(.)/gs, (_, c: string) => ESCAPES[c] ?? c)

/** `['a','b\'c']` as its strings. */
function quotedStrings(text: string): string[] {
  const out: string[] = []
  for (const m of text.matchAll(/'((?:[^'\\]|\\.)*)'/gs)) out.push(unescapeText(m[1]))
  return out
}

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }))
})
const stop = () => server.close(() => void anchor.close().finally(() => process.exit(0)))
process.on('SIGTERM', stop).on('SIGINT', stop)
