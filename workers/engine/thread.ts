// The read server's thread (in-thread.ts starts it): its own event loop, heap and connection to
// the engine this process holds, so a read never waits for the main thread's batches or their
// garbage collection.
import { parentPort, workerData } from 'node:worker_threads'
import { openClickHouse } from '../../shared/clickhouse/client.js'
import { directReads } from '../../shared/clickhouse/reads.js'
import { createLogger } from '../../shared/logger.js'
import { connectFailFast, patientConnection } from '../../shared/redis-connections.js'
import type { ReadThreadData, ReadThreadMessage } from './in-thread.js'
import { serveClickHouseReads } from './server.js'

const data = workerData as ReadThreadData
const port = parentPort!
const say = (m: ReadThreadMessage) => port.postMessage(m)

const logger = createLogger(data.logLevel).child({ thread: 'clickhouse-reads' })
const ch = openClickHouse({ dataDir: data.dataDir, database: data.database, sameProcess: true })
// Replies on a fail-fast connection, the pop on a blocking one of its own.
const redis = await connectFailFast(data.redisUrl)
const blocking = patientConnection(data.redisUrl)

const server = await serveClickHouseReads({
  blocking,
  redis,
  prefix: data.prefix,
  reads: directReads(ch),
  // The main thread holds its batches while a read runs here.
  priority: {
    async run<T>(read: () => Promise<T>): Promise<T> {
      say({ type: 'begin' })
      try {
        return await read()
      } finally {
        say({ type: 'end' })
      }
    },
  },
  logger,
})
// Stopped, the thread stays (idle, on its open port) until the process ends: closing its
// connection, or ending the thread, which closes it, leaves the engine hanging for every other
// connection of the process (chdb 26.7: the main thread's next query never returns).
port.on('message', (m: 'stop') => {
  if (m !== 'stop') return
  void (async () => {
    await server.stop()
    await redis.quit().catch(() => redis.disconnect())
    say({ type: 'stopped' })
  })()
})
say({ type: 'ready' })
