// The load generator's HTTP/1.1 client: keep-alive sockets, a request written in one piece, the
// answer parsed only as far as the bench reads it (status, headers, body by Content-Length or
// chunks). It shares the 2-core machine with the service it measures, so its CPU is taken from
// the service: node:http's client spends ~0.3 ms of CPU a small request here, a third of a core at
// 1,000 requests/s that a remote sender would not take.
import net from 'node:net'

export interface Reply {
  status: number
  /** Header names in lower case. */
  headers: Record<string, string>
  body: string
}

/** An error carrying a code, as node:net's do (`timeout` for the bench's own). */
const failure = (message: string, code: string) => Object.assign(new Error(message), { code })

interface InFlight {
  resolve(r: Reply): void
  reject(e: Error): void
  startedAt: number
}

const HEADER_END = Buffer.from('\r\n\r\n')

/** One keep-alive socket, one exchange at a time. */
class Connection {
  private buffered: Buffer = Buffer.alloc(0)
  private head?: { status: number; headers: Record<string, string>; bodyStart: number }
  inFlight?: InFlight
  idleSince = 0
  closed = false

  constructor(
    readonly socket: net.Socket,
    private readonly release: (c: Connection) => void,
  ) {
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.received(chunk))
    socket.on('error', (e) => this.fail(e))
    socket.on('close', () => this.fail(failure('socket closed before the answer', 'ECONNRESET')))
  }

  send(text: string, inFlight: InFlight): void {
    this.inFlight = inFlight
    this.socket.write(text)
  }

  fail(e: Error): void {
    this.closed = true
    this.socket.destroy()
    const f = this.inFlight
    this.inFlight = undefined
    f?.reject(e)
  }

  private received(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk
    if (!this.head) {
      const end = this.buffered.indexOf(HEADER_END)
      if (end < 0) return
      const lines = this.buffered.subarray(0, end).toString('latin1').split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      this.head = { status: Number(lines[0].split(' ')[1]), headers, bodyStart: end + HEADER_END.length }
    }
    const body = this.bodyOf(this.head)
    if (body === undefined) return
    const { status, headers } = this.head
    this.head = undefined
    this.buffered = Buffer.alloc(0)
    const f = this.inFlight!
    this.inFlight = undefined
    if (headers.connection === 'close') {
      this.closed = true
      this.socket.end()
    } else {
      this.release(this)
    }
    f.resolve({ status, headers, body })
  }

  /** The whole body once it has arrived (the answers carry a length or come in chunks). */
  private bodyOf(head: { status: number; headers: Record<string, string>; bodyStart: number }): string | undefined {
    const rest = this.buffered.subarray(head.bodyStart)
    if (head.headers['transfer-encoding'] === 'chunked') {
      const parts: Buffer[] = []
      for (let at = 0; ; ) {
        const eol = rest.indexOf('\r\n', at)
        if (eol < 0) return undefined
        const size = parseInt(rest.subarray(at, eol).toString('latin1'), 16)
        if (rest.length < eol + 2 + size + 2) return undefined
        if (size === 0) return Buffer.concat(parts).toString('utf8')
        parts.push(rest.subarray(eol + 2, eol + 2 + size))
        at = eol + 2 + size + 2
      }
    }
    const length = Number(head.headers['content-length'] ?? 0)
    return rest.length < length ? undefined : rest.subarray(0, length).toString('utf8')
  }
}

/**
 * Requests to one or more origins over keep-alive sockets: an idle one is reused, else a new one
 * opened, so a request never waits for another (open loop). A socket idle for `idleMs` is closed
 * before the server's keep-alive timeout (65 s) would close it under a request; an answer not
 * complete after `timeoutMs` fails with code `timeout`.
 */
export class HttpClient {
  private readonly idle = new Map<string, Connection[]>()
  private readonly busy = new Set<Connection>()
  private readonly sweeper: NodeJS.Timeout

  constructor(private readonly opts: { timeoutMs: number; idleMs: number }) {
    this.sweeper = setInterval(() => this.sweep(), 1000)
    this.sweeper.unref()
  }

  /** `url` names the origin; `path` is the request target. */
  request(url: string, { method, path, headers = {}, body }: { method: string; path: string; headers?: Record<string, string>; body?: string }): Promise<Reply> {
    const { host, hostname, port } = new URL(url)
    let text = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`
    for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`
    text += body === undefined ? '\r\n' : `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    return new Promise((resolve, reject) => {
      const c = this.connection(hostname, Number(port || 80))
      this.busy.add(c)
      c.send(text, {
        resolve: (r) => {
          this.busy.delete(c)
          resolve(r)
        },
        reject: (e) => {
          this.busy.delete(c)
          reject(e)
        },
        startedAt: performance.now(),
      })
    })
  }

  private connection(host: string, port: number): Connection {
    const key = `${host}:${port}`
    const idle = this.idle.get(key)
    for (let c = idle?.pop(); c; c = idle?.pop()) if (!c.closed) return c
    return new Connection(net.connect({ host, port }), (c) => {
      c.idleSince = performance.now()
      const list = this.idle.get(key) ?? []
      list.push(c)
      this.idle.set(key, list)
    })
  }

  private sweep(): void {
    const now = performance.now()
    for (const c of this.busy) if (c.inFlight && now - c.inFlight.startedAt > this.opts.timeoutMs) c.fail(failure('timeout', 'timeout'))
    for (const [key, list] of this.idle) {
      const kept: Connection[] = []
      for (const c of list) {
        if (!c.closed && now - c.idleSince < this.opts.idleMs) kept.push(c)
        else c.fail(failure('idle', 'idle'))
      }
      this.idle.set(key, kept)
    }
  }
}
