import type { Redis } from 'ioredis'
import type { ClickHouse } from './clickhouse/client.js'
import { recordDeployment, recordedDeployments } from './clickhouse/deployment-repository.js'
import { ConfigError, type Config } from './config.js'
import { claimHistory, ensureDeployment, type HistoryKind } from './db/repositories/deployment-repository.js'
import type { Pool } from './db/pool.js'
import { redisScript } from './redis-script.js'

/**
 * A deployment is one Postgres database, one Redis queue prefix and one ClickHouse history. Each
 * holds the deployment's id; a process whose parts disagree would take another deployment's jobs
 * or write its history where nobody reads it, so it refuses to start, naming the setting to change.
 */
export interface Deployment {
  id: string
  /** Where its history lives, once a process has opened it. */
  history: HistoryKind | null
  /** The embedded engine's place, `host:directory`. */
  engine_at: string | null
}

/** A process's Postgres, Redis prefix and ClickHouse belong to different deployments (main.ts exits 2). */
export class DeploymentMismatchError extends ConfigError {}

/** A URL as a message may show it: without its password. */
export function shownUrl(url: string): string {
  const u = new URL(url)
  if (u.password) u.password = '***'
  return u.toString()
}

export const deploymentKey = (prefix: string) => `${prefix}:deployment`

/** KEYS: the prefix's deployment key. ARGV: our id. Claims an unclaimed prefix; answers the id it holds. */
const BIND = `
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`
const bindScript = redisScript(BIND)

/**
 * The deployment of this process's database, its Redis prefix bound to it. Redis keeps the binding
 * as long as it keeps the queues (a Redis emptied by a restart is bound again by the next process).
 */
export async function bindDeployment(parts: { pg: Pool; redis: Redis; config: Config }): Promise<Deployment> {
  const { config } = parts
  const row = await ensureDeployment(parts.pg)
  const held = String(await bindScript(parts.redis, [deploymentKey(config.QUEUE_PREFIX)], [row.id]))
  if (held !== row.id) {
    throw new DeploymentMismatchError(
      `QUEUE_PREFIX "${config.QUEUE_PREFIX}" on ${shownUrl(config.REDIS_URL)} belongs to another deployment (${held}); ` +
        `this process's database (${shownUrl(config.DATABASE_URL)}) is deployment ${row.id}. ` +
        'Give this deployment a QUEUE_PREFIX of its own, or set DATABASE_URL to the database of the deployment that uses this prefix.',
    )
  }
  const wanted: HistoryKind = config.CLICKHOUSE_URL ? 'server' : 'embedded'
  if (row.history && row.history !== wanted) {
    throw new DeploymentMismatchError(
      row.history === 'server'
        ? `this deployment's event history is on a ClickHouse server (recorded in ${shownUrl(config.DATABASE_URL)}), but CLICKHOUSE_URL is not set: set it to that server in every process.`
        : `this deployment's event history is in the embedded engine of a worker host (recorded in ${shownUrl(config.DATABASE_URL)}), but CLICKHOUSE_URL is set: unset it, or move the history to the server first (docs/scaling.md).`,
    )
  }
  return row
}

/**
 * Binds the ClickHouse this process opened to the deployment: a new database is given its id, one
 * holding another deployment's id is refused. `where` names the setting that chose it.
 */
export async function bindClickHouse(ch: ClickHouse, deployment: Deployment, parts: { pg: Pool; where: string; engineAt?: string }): Promise<void> {
  const recorded = await recordedDeployments(ch)
  const foreign = recorded.filter((id) => id !== deployment.id)
  if (foreign.length) {
    throw new DeploymentMismatchError(
      `the ClickHouse database "${ch.database}" at ${parts.where} holds the history of another deployment (${foreign.join(', ')}); ` +
        `this process's database is deployment ${deployment.id}. Point ${ch.embedded ? 'DATA_DIR' : 'CLICKHOUSE_URL'} at this deployment's history, or DATABASE_URL at that deployment's database.`,
    )
  }
  if (recorded.length === 0) await recordDeployment(ch, deployment.id)
  const kind: HistoryKind = ch.embedded ? 'embedded' : 'server'
  if (deployment.history !== kind) {
    const now = await claimHistory(parts.pg, kind, parts.engineAt)
    if (now.history !== kind) throw new DeploymentMismatchError(`this deployment's event history was recorded as ${now.history} by another process while this one opened ${kind} ClickHouse at ${parts.where}`)
    Object.assign(deployment, now)
  }
}
