import { once } from 'node:events'
import { createServer } from 'node:net'

/** A loopback port nothing listens on right now, for a process a test starts. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  await new Promise((r) => server.close(r))
  return port
}
