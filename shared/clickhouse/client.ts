import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { createChdbConnection } from 'chdb/connection'
import { flockSync } from 'fs-ext'

export type { ClickHouseClient }

/** Rows already formatted as TabSeparated text (UTF-8), for one table's columns. */
export interface TabSeparatedInsert {
  table: string
  columns: readonly string[]
  settings?: Record<string, string | number | boolean>
  body: Buffer | string
}

export interface ClickHouse {
  client: ClickHouseClient
  database: string
  embedded: boolean
  /** The embedded engine's data directory (undefined for a server). */
  dataDir?: string
  /** The least time between the starts of two inserts into one table (BatchInserter). */
  insertIntervalMs: number
  /**
   * CLICKHOUSE_CLUSTER: the history tables are Distributed tables (their usual names) over
   * Replicated `<name>_local` tables on every node of this cluster (docs/clickhouse.md).
   */
  cluster?: string
  /** Inserts formatted rows: handed to the embedded engine as they are, streamed to a server. */
  insertTabSeparated(insert: TabSeparatedInsert): Promise<void>
  /**
   * The same ClickHouse on a connection of its own, for long statements that must not hold the
   * others back (the embedded engine runs one statement at a time per connection; on a server,
   * connections of its own, so a sweep's long statements never take the workers' connections).
   * One per name, closed with this one.
   */
  beside(name: string): ClickHouse
  close(): Promise<void>
}

export class EmbeddedEngineBusyError extends Error {}

/**
 * chDB binds one data directory to one process: a second process opening it would corrupt it.
 * The guard is an exclusive flock(2) on the directory itself, so the kernel drops it the moment
 * its holder dies, even by kill -9 and before the dead process is reaped; no stale lock is left for
 * a restart to judge. The lock sits on the directory rather than a file in it: deleting a lock file
 * would let a second process lock a new one while the first still runs. `owner.pid` only names the
 * holder. Node opens files close-on-exec, so no child process inherits it. Answers the unlock, or
 * undefined while another process holds the directory.
 */
export function tryLockDataDir(dir: string): (() => void) | undefined {
  mkdirSync(dir, { recursive: true })
  const fd = openSync(dir, 'r')
  try {
    flockSync(fd, 'exnb')
  } catch (e) {
    closeSync(fd)
    if ((e as NodeJS.ErrnoException).code !== 'EAGAIN' && (e as NodeJS.ErrnoException).code !== 'EWOULDBLOCK') throw e
    return undefined
  }
  writeFileSync(path.join(dir, 'owner.pid'), String(process.pid))
  return () => closeSync(fd)
}

/** `tryLockDataDir`, refusing a directory another process holds. */
export function lockDataDir(dir: string): () => void {
  const unlock = tryLockDataDir(dir)
  if (unlock) return unlock
  const holder = readHolder(dir)
  throw new EmbeddedEngineBusyError(`the embedded ClickHouse data directory ${dir} is in use${holder ? ` by process ${holder}` : ''}`)
}

/** Whether an engine's data directory holds the database (chDB keeps one metadata file per database), without opening it. */
export function engineHoldsDatabase(dir: string, database: string): boolean {
  return existsSync(path.join(dir, 'metadata', `${database}.sql`))
}

function readHolder(dir: string): number | undefined {
  try {
    return Number(readFileSync(path.join(dir, 'owner.pid'), 'utf8').trim()) || undefined
  } catch {
    return undefined
  }
}

export interface ClickHouseOptions {
  url?: string
  dataDir: string
  database: string
  /**
   * Another thread of this process already holds `dataDir` (its lock and its engine): open a
   * connection of our own to the same engine beside it. Connections to one engine run their
   * statements side by side; those on one connection run one at a time.
   */
  sameProcess?: boolean
  /** Config CLICKHOUSE_INSERT_INTERVAL_MS; 0 (the default here) inserts as soon as the last insert finished. */
  insertIntervalMs?: number
  /** Config CLICKHOUSE_CLUSTER (a server only). */
  cluster?: string
  /** A server's connections at most (`clickhouseConnectionsFor`); statements past them wait for one. */
  maxOpenConnections?: number
}

/** A server's connections beside the first (`beside`): the history sweep's copy and its two erasures at once. */
const BESIDE_CONNECTIONS = 3

/** A server when `url` is set, else the embedded engine under `dataDir`; the same client API either way. */
export function openClickHouse(opts: ClickHouseOptions): ClickHouse {
  const insertIntervalMs = opts.insertIntervalMs ?? 0
  if (opts.url) {
    const client = createClient({
      url: opts.url,
      request_timeout: 300_000,
      max_open_connections: opts.maxOpenConnections ?? 10,
      // Query parameters travel in the request body (multipart/form-data), not in the URL: a sweep
      // binds up to 200,000 profile ids, past the server's 1 MiB http_max_uri_size and any proxy's limit.
      use_multipart_params: true,
      // A long statement (ON CLUSTER DDL waits up to 180 s for every host) keeps its connection
      // busy for a load balancer's idle timeout (often 60 s) by progress headers.
      clickhouse_settings: { send_progress_in_http_headers: 1, http_headers_progress_interval_ms: '30000' },
    })
    const besides = new Map<string, ClickHouse>()
    return {
      client,
      database: opts.database,
      embedded: false,
      insertIntervalMs,
      cluster: opts.cluster,
      insertTabSeparated: async ({ table, columns, settings, body }) => {
        // A byte stream of formatted rows: the client passes it through as it is.
        const values = Readable.from([body], { objectMode: false })
        await client.insert({ table, columns: [...columns] as [string, ...string[]], values, format: 'TabSeparated', clickhouse_settings: settings })
      },
      beside(name) {
        let other = besides.get(name)
        if (!other) besides.set(name, (other = openClickHouse({ ...opts, maxOpenConnections: BESIDE_CONNECTIONS })))
        return { ...other, database: this.database }
      },
      close: async () => {
        for (const other of besides.values()) await other.close()
        await client.close()
      },
    }
  }
  const unlock = opts.sameProcess ? () => {} : lockDataDir(opts.dataDir)
  return clickHouseOver({ database: opts.database, dataDir: opts.dataDir, insertIntervalMs, connect: () => engineConnection(opts.dataDir), onClose: unlock })
}

/** The connection contract of `@clickhouse/client` (client-common's `Connection`), which chdb implements. */
export type ClientConnection = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>
export type ClickHouseSettings = NonNullable<Parameters<ClientConnection['query']>[0]['clickhouse_settings']>
export type StatementSummary = Awaited<ReturnType<ClientConnection['command']>>['summary']

/** A connection to the embedded engine that also takes formatted rows as they are. */
export interface EngineConnection extends ClientConnection {
  rawInsert(insert: TabSeparatedInsert): Promise<void>
}

/** A connection of this process to the embedded engine under `dataDir` (held by this process). */
export function engineConnection(dataDir: string): EngineConnection {
  const connection = createChdbConnection({ path: dataDir })
  // The engine's own raw insert: the text goes to its parser once, off the event loop, where the
  // client's path would copy it through a stream, a string and the statement on the main thread.
  const rawInsert = async ({ table, columns, settings, body }: TabSeparatedInsert) => {
    await connection.chdb.rawInsert({ table, columns, settings, format: 'TabSeparated', values: body })
  }
  // chdb ships its own copy of the client-common types; the runtime interface is the same.
  return Object.assign(connection, { rawInsert }) as unknown as EngineConnection
}

/**
 * The embedded engine behind engine connections: `connect(lane)` opens one per lane (`beside`),
 * each running its statements one at a time, the lanes side by side. The connections may be the
 * engine's own (engineConnection) or reach it in another process (shared/queue/engine-channel.ts).
 */
export function clickHouseOver(opts: {
  database: string
  dataDir?: string
  insertIntervalMs: number
  connect: (lane: string) => EngineConnection
  onClose?: () => void
}): ClickHouse {
  const lanes = new Map<string, ClickHouse>()
  const lane = (name: string): ClickHouse => {
    const connection = opts.connect(name)
    const client = createClient({ connection: connection as never })
    return {
      client,
      database: opts.database,
      embedded: true,
      insertIntervalMs: opts.insertIntervalMs,
      dataDir: opts.dataDir,
      insertTabSeparated: (insert) => connection.rawInsert(insert),
      beside(other) {
        let found = lanes.get(other)
        if (!found) lanes.set(other, (found = lane(other)))
        // Called on a copy aimed at another database (tests), the connection follows the copy.
        return { ...found, database: this.database }
      },
      // Closing the main lane closes them all (and lets go of the engine); another lane closes alone.
      close: async () => {
        if (name !== 'main') return client.close()
        for (const l of lanes.values()) await l.client.close()
        await client.close()
        opts.onClose?.()
      },
    }
  }
  return lane('main')
}
