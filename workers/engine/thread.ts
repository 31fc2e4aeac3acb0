// The engine holder's thread (in-thread.ts starts it): its own event loop, heap and connections to
// the engine this process holds, so a read or a forwarded statement never waits for the main
// thread's batches or their garbage collection.
import { parentPort, workerData } from 'node:worker_threads'
import { engineConnection, openClickHouse } from '../../shared/clickhouse/client.js'
import { directReads } from '../../shared/clickhouse/reads.js'
import { createLogger } from '../../shared/logger.js'
import { clickhouseReadKeys } from '../../shared/queue/clickhouse-reads.js'
import { connectFailFast, patientConnection } from '../../shared/redis-connections.js'
import { keepSeat } from './heartbeat.js'
import type { EngineThreadData, EngineThreadMessage } from './in-thread.js'
import { serveClickHouseReads } from './reads.js'
import { serveEngineStatements } from './statements.js'

const data = workerData as EngineThreadData
const port = parentPort!
const say = (m: EngineThreadMessage) => port.postMessage(m)

const logger = createLogger(data.logLevel).child({ thread: 'engine' })
const ch = openClickHouse({ dataDir: data.dataDir, database: data.database, sameProcess: true })
// Replies and the heartbeat on a fail-fast connection, each pop on a blocking one of its own.
const redis = await connectFailFast(data.redisUrl)

const seat = await keepSeat(redis, clickhouseReadKeys(data.prefix).holder, data.holder, () => say({ type: 'lost' }))
const reads = await serveClickHouseReads({
  blocking: patientConnection(data.redisUrl),
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
const statements = serveEngineStatements({
  blocking: patientConnection(data.redisUrl),
  redis,
  prefix: data.prefix,
  seat: data.seat,
  connect: () => engineConnection(data.dataDir),
  logger,
})
// Stopped, the thread stays (idle, on its open port) until the process ends: closing its
// connections, or ending the thread, which closes them, leaves the engine hanging for every other
// connection of the process (chdb 26.7: the main thread's next query never returns).
port.on('message', (m: 'stop') => {
  if (m !== 'stop') return
  void (async () => {
    await Promise.all([reads.stop(), statements.stop()])
    await seat.stop()
    await redis.quit().catch(() => redis.disconnect())
    say({ type: 'stopped' })
  })()
})
say({ type: 'ready' })
