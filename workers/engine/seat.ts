import { randomUUID } from 'node:crypto'
import os from 'node:os'
import path from 'node:path'
import type { Redis } from 'ioredis'
import { clickHouseOver, engineConnection, engineHoldsDatabase, openClickHouse, tryLockDataDir, type ClickHouse, type EngineConnection } from '../../shared/clickhouse/client.js'
import type { Config } from '../../shared/config.js'
import { clickhouseDatabaseOf, prepareClickHouse } from '../../shared/context.js'
import type { Pool } from '../../shared/db/pool.js'
import { holdsProfiles, reserveEnginePlace } from '../../shared/db/repositories/deployment-repository.js'
import { bindClickHouse, DeploymentMismatchError, type Deployment } from '../../shared/deployment.js'
import type { Logger } from '../../shared/logger.js'
import { clickhouseReadKeys, type HolderInfo } from '../../shared/queue/clickhouse-reads.js'
import { channelConnection, EngineChannel } from '../../shared/queue/engine-channel.js'
import { patientConnection } from '../../shared/redis-connections.js'
import { takeSeat } from './heartbeat.js'
import { serveEngineInThread, type EngineThreadData } from './in-thread.js'
import type { Served } from './pop-loop.js'
import { ReadPriority } from './priority.js'

/** How often a standby (a process on the engine's host that does not hold it) tries to take it over. */
const STANDBY_EVERY_MS = 1_000

/**
 * Where a worker process's ClickHouse statements run on the embedded engine. A deployment has one
 * engine, in the DATA_DIR of one host; one process there holds it (its directory's flock and the
 * holder key in Redis) and runs what only it can: ClickHouse writes and reads. Every other worker
 * process (a second one on that host, or any on another host) sends its statements to the holder
 * over the engine channel, and a second process on the engine's host stands by to take the engine
 * over the moment the holder dies. A host whose DATA_DIR holds no engine never makes one, unless
 * it is a new deployment's first.
 */
export interface EngineSeat {
  /** The engine for this process's workers: its own while it holds it, else reached through the holder. */
  clickhouse: ClickHouse
  /** Resolves once no API read runs on the engine this process holds (at once when it holds none). */
  readsFirst(): Promise<void>
  holds(): boolean
  close(): Promise<void>
}

/** A new holding of the engine under `dataDir`: its id and the holder key's value that names it. */
function newSeat(dataDir: string): { seat: string; me: string } {
  const seat = randomUUID()
  return { seat, me: JSON.stringify({ pid: process.pid, host: os.hostname(), seat, dataDir } satisfies HolderInfo) }
}

function threadData(config: Config, held: { dataDir: string; database: string; me: string; seat: string }): EngineThreadData {
  return { redisUrl: config.REDIS_URL, prefix: config.QUEUE_PREFIX, dataDir: held.dataDir, database: held.database, logLevel: config.LOG_LEVEL, holder: held.me, seat: held.seat }
}

interface Held {
  ch: ClickHouse
  thread: Served
  lanes: Map<string, EngineConnection>
}

export async function takeEngineSeat(opts: { config: Config; logger: Logger; pg: Pool; redis: Redis; deployment: Deployment }): Promise<EngineSeat> {
  const { config, logger, pg, deployment } = opts
  const dir = path.resolve(config.DATA_DIR, 'clickhouse')
  const database = clickhouseDatabaseOf(config)
  const place = `${os.hostname()}:${dir}`
  const holderKey = clickhouseReadKeys(config.QUEUE_PREFIX).holder
  const channel = new EngineChannel(opts.redis, patientConnection(config.REDIS_URL), config.QUEUE_PREFIX)
  const priority = new ReadPriority()
  let held: Held | undefined
  let closed = false

  /** Whether this place may hold the engine: it holds it, or is a new deployment's first. */
  const mayHold = async (): Promise<boolean> => {
    if (deployment.engine_at === place) return engineHoldsDatabase(dir, database) || deployment.history === null
    if (engineHoldsDatabase(dir, database)) {
      if (deployment.engine_at === null) return true
      throw new DeploymentMismatchError(
        `DATA_DIR ${config.DATA_DIR} holds a ClickHouse database "${database}", but this deployment's engine is at ${deployment.engine_at}: ` +
          'two engines would split its history. Remove this copy, or, if the engine was moved here, record its new place (docs/scaling.md, Moving the engine).',
      )
    }
    if (deployment.engine_at !== null || deployment.history !== null) return false
    if (await holdsProfiles(pg)) {
      logger.warn({ dataDir: dir }, 'this deployment holds profiles but records no event history: its engine lives on another host; working through it')
      return false
    }
    Object.assign(deployment, await reserveEnginePlace(pg, place))
    return deployment.engine_at === place
  }

  const tryHold = async (): Promise<boolean> => {
    const unlock = tryLockDataDir(dir)
    if (!unlock) return false
    const { seat, me } = newSeat(dir)
    try {
      if (!(await takeSeat(opts.redis, holderKey, me))) {
        // The lock is ours, so a seat named for this directory is a holder that died: its key outlives it by seconds.
        const other = JSON.parse((await opts.redis.get(holderKey)) ?? '{}') as HolderInfo
        if (other.dataDir !== dir || other.host !== os.hostname()) {
          logger.error({ holder: other }, 'another host holds this deployment\'s engine: not opening the one in this DATA_DIR')
          unlock()
          return false
        }
        await opts.redis.del(holderKey)
        if (!(await takeSeat(opts.redis, holderKey, me))) {
          unlock()
          return false
        }
      }
      const ch = openClickHouse({ dataDir: dir, database, sameProcess: true, insertIntervalMs: config.CLICKHOUSE_INSERT_INTERVAL_MS })
      await prepareClickHouse(ch, { pg, logger, migrate: true })
      await bindClickHouse(ch, deployment, { pg, where: `DATA_DIR ${dir}`, engineAt: place })
      const thread = await serveEngineInThread({ data: threadData(config, { dataDir: dir, database, me, seat }), priority, logger })
      // The process keeps the lock (and the engine) until it exits: chdb binds its directory for the process's life.
      held = { ch, thread, lanes: new Map() }
      logger.info({ dataDir: dir }, 'holding the embedded engine')
      return true
    } catch (e) {
      await opts.redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, holderKey, me).catch(() => {})
      unlock()
      throw e
    }
  }

  const laneConnection = (lane: string): EngineConnection => {
    const remote = channelConnection(channel, lane)
    const target = (): EngineConnection => {
      if (!held) return remote
      let own = held.lanes.get(lane)
      if (!own) held.lanes.set(lane, (own = engineConnection(dir)))
      return own
    }
    return {
      query: (p) => target().query(p),
      exec: (p) => target().exec(p),
      command: (p) => target().command(p),
      insert: (p) => target().insert(p),
      ping: (p) => target().ping(p),
      rawInsert: (i) => target().rawInsert(i),
      async close() {},
    }
  }

  let standby: NodeJS.Timeout | undefined
  if (await mayHold()) {
    if (!(await tryHold())) {
      const holder = await channel.currentHolder()
      logger.info({ holder }, 'standing by: another process on this host holds the embedded engine; working through it and taking it over if it stops')
      const look = async () => {
        try {
          if (!closed && !held && (await tryHold())) logger.warn('took over the embedded engine from a holder that stopped')
        } catch (e) {
          logger.error({ err: e }, 'could not take over the embedded engine')
        }
        if (!closed && !held) standby = setTimeout(look, STANDBY_EVERY_MS)
      }
      standby = setTimeout(look, STANDBY_EVERY_MS)
    }
  } else {
    logger.info({ engine: deployment.engine_at ?? 'on another host' }, 'this host holds no engine of this deployment: its ClickHouse work goes to the engine holder')
  }

  return {
    clickhouse: clickHouseOver({ database, dataDir: dir, insertIntervalMs: config.CLICKHOUSE_INSERT_INTERVAL_MS, connect: laneConnection }),
    readsFirst: () => (held ? priority.yield() : Promise.resolve()),
    holds: () => held !== undefined,
    async close() {
      closed = true
      clearTimeout(standby)
      await held?.thread.stop()
      await channel.close()
    },
  }
}

/**
 * The seat of an engine this process opened itself (tests, which share one engine per process):
 * the holder key taken and the engine thread started, for API processes and engine-less workers.
 */
export async function holdOpenEngine(opts: { config: Config; logger: Logger; redis: Redis; clickhouse: ClickHouse }): Promise<EngineSeat> {
  const { config, clickhouse } = opts
  const { seat, me } = newSeat(clickhouse.dataDir!)
  if (!(await takeSeat(opts.redis, clickhouseReadKeys(config.QUEUE_PREFIX).holder, me))) throw new Error('another process holds this deployment\'s engine')
  const priority = new ReadPriority()
  const thread = await serveEngineInThread({ data: threadData(config, { dataDir: clickhouse.dataDir!, database: clickhouse.database, me, seat }), priority, logger: opts.logger })
  return { clickhouse, readsFirst: () => priority.yield(), holds: () => true, close: () => thread.stop() }
}
