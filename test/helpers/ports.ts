import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createServer } from 'node:net'

/** A loopback port nothing listens on right now, for a process a test starts. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  await new Promise((r) => server.close(r))
  return port
}

/** An HTTP server on a free loopback port (a callback endpoint, a stand-in bucket); `url` is its base address. */
export async function localServer(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}
