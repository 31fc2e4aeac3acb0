import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { ShimStatement } from './clickhouse-http-shim.js'

export type { ShimStatement }

const root = path.resolve(import.meta.dirname, '../..')

export interface ClickHouseShim {
  /** http://127.0.0.1:<port>, for CLICKHOUSE_URL. */
  url: string
  version: string
  /** Every request the shim received since it started or was reset, in order. */
  statements(): Promise<ShimStatement[]>
  /** The most statements it ran at once since it started or was reset. */
  mostAtOnce(): Promise<number>
  reset(): Promise<void>
  close(): Promise<void>
}

/**
 * Starts the ClickHouse HTTP-interface shim (clickhouse-http-shim.ts: a chDB engine behind the
 * protocol subset the client uses, NOT a server) in a process of its own, with a data directory
 * of its own (chDB binds one per process, and this test process holds its own), answering
 * `version()` with `version`.
 */
export async function startClickHouseShim(version: string, opts: { dataDir?: string } = {}): Promise<ClickHouseShim> {
  // A data directory the caller names outlives the shim (a later one, of another version, opens it: an upgrade).
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'uds-ch-shim-'))
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/clickhouse-http-shim.ts', dataDir, version], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const [line] = (await Promise.race([
    once(createInterface({ input: child.stdout! }), 'line'),
    once(child, 'exit').then(([code]) => Promise.reject(new Error(`the ClickHouse shim exited with ${code} before listening`))),
  ])) as [string]
  const url = `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`
  return {
    url,
    version,
    async statements() {
      return (await fetch(`${url}/shim/statements`)).json() as Promise<ShimStatement[]>
    },
    async mostAtOnce() {
      return Number(await (await fetch(`${url}/shim/most-at-once`)).text())
    },
    async reset() {
      await fetch(`${url}/shim/reset`, { method: 'POST' })
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        await once(child, 'exit')
      }
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
