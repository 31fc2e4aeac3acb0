import { rm } from 'node:fs/promises'
import type { Config } from '../../shared/config.js'
import { listExpiredLocalExports, markExportFilesPurged } from '../../shared/db/repositories/export-repository.js'
import type { Pool } from '../../shared/db/pool.js'
import type { Logger } from '../../shared/logger.js'
import { localExportDir } from '../../shared/storage/export-layout.js'

const BATCH = 100
const SWEEP_EVERY_MS = 10 * 60_000

/**
 * Deletes the local files of exports whose download link has expired (the link answers 410 from
 * then on anyway); the export's row and its history stay. Files go before the row is marked, so a
 * crash in between only repeats a harmless delete. Answers how many exports were purged.
 */
export async function purgeExpiredExportFiles(deps: { pg: Pool; config: Config }, now = new Date()): Promise<number> {
  const expiredBefore = new Date(now.getTime() - deps.config.EXPORT_URL_TTL_SECONDS * 1000)
  let purged = 0
  for (;;) {
    const expired = await listExpiredLocalExports(deps.pg, expiredBefore, BATCH)
    for (const e of expired) {
      await rm(localExportDir(deps.config.DATA_DIR, e.object_prefix), { recursive: true, force: true })
      await markExportFilesPurged(deps.pg, e.id)
    }
    purged += expired.length
    if (expired.length < BATCH) return purged
  }
}

/** Sweeps every 10 minutes in export worker processes; answers a function that stops it. */
export function startExpiredFilesSweeper(deps: { pg: Pool; config: Config; logger: Logger }): () => void {
  const sweep = () => {
    purgeExpiredExportFiles(deps)
      .then((n) => n && deps.logger.info({ purged: n }, 'deleted the files of expired export downloads'))
      .catch((e) => deps.logger.warn({ err: (e as Error).message }, 'expired export files not deleted; retrying at the next sweep'))
  }
  sweep()
  const timer = setInterval(sweep, SWEEP_EVERY_MS)
  timer.unref()
  return () => clearInterval(timer)
}
