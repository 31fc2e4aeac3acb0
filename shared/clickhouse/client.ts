import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import { createChdbConnection } from 'chdb/connection'

export type { ClickHouseClient }

export interface ClickHouse {
  client: ClickHouseClient
  database: string
  embedded: boolean
  close(): Promise<void>
}

export class EmbeddedEngineBusyError extends Error {}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * chDB binds one data directory to one process. A lock file holding our pid keeps a second
 * process from opening the same directory (which would corrupt it). The file is created
 * atomically (`wx`), so two processes starting at once cannot both win; a stale lock of a dead
 * pid is taken over.
 */
function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true })
  const lockFile = path.join(dir, 'owner.pid')
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lockFile, String(process.pid), { flag: 'wx' })
      break
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
    }
    const pid = Number(readFileSync(lockFile, 'utf8').trim())
    if (pid === process.pid) break
    // An empty file is a lock being written right now, unless it is old (a crash mid-write).
    const beingWritten = !pid && Date.now() - statSync(lockFile).mtimeMs < 5_000
    if ((pid && pidAlive(pid)) || beingWritten || attempt >= 2) {
      throw new EmbeddedEngineBusyError(
        `the embedded ClickHouse data directory ${dir} is in use by process ${pid}; ` +
          'only one worker process may hold the embedded engine. Set CLICKHOUSE_URL to a ClickHouse server to run more worker processes.',
      )
    }
    rmSync(lockFile, { force: true })
  }
  return () => {
    try {
      if (Number(readFileSync(lockFile, 'utf8')) === process.pid) rmSync(lockFile)
    } catch {
      /* already gone */
    }
  }
}

export interface ClickHouseOptions {
  url?: string
  dataDir: string
  database: string
}

/** A server when `url` is set, else the embedded engine under `dataDir`; the same client API either way. */
export function openClickHouse(opts: ClickHouseOptions): ClickHouse {
  if (opts.url) {
    const client = createClient({ url: opts.url, request_timeout: 300_000 })
    return { client, database: opts.database, embedded: false, close: () => client.close() }
  }
  const unlock = lockDataDir(opts.dataDir)
  // chdb ships its own copy of the client-common types; the runtime interface is the same.
  const connection = createChdbConnection({ path: opts.dataDir }) as never
  const client = createClient({ connection })
  return {
    client,
    database: opts.database,
    embedded: true,
    close: async () => {
      await client.close()
      unlock()
    },
  }
}
