import { ConfigError } from '../config.js'
import type { ClickHouse } from './client.js'

/**
 * The oldest ClickHouse release the service's SQL is written for: the 24.3 LTS, the first with the
 * analyzer on by default (the GLOBAL IN / JOIN forms and FINAL reads here are planned by it), and
 * with every setting named in `insertSettings` (`distributed_foreground_insert` since 23.10).
 * Older servers are refused at start rather than half-run.
 */
export const OLDEST_SUPPORTED_VERSION = '24.3'

/** What a start learns of the ClickHouse it runs on; migrations and statement settings follow it. */
export interface ServerFacts {
  /** `version()`, e.g. 24.8.14.39 (the embedded engine's own release for chDB). */
  version: string
  /** The shape of CLICKHOUSE_CLUSTER, when set. */
  cluster?: ClusterShape
}

export interface ClusterShape {
  name: string
  shards: number
  /** Every replica of every shard: a sweep's mutation is done once it is done on each. */
  hosts: number
  /** The fewest replicas a shard has: inserts wait until that many hold their rows (`insertSettings`). */
  replicasPerShard: number
}

/** Dotted release numbers compared part by part (24.11 is after 24.8). */
export function versionAtLeast(version: string, wanted: string): boolean {
  const have = version.split('.').map(Number)
  const want = wanted.split('.').map(Number)
  for (let i = 0; i < want.length; i++) {
    const h = have[i] ?? 0
    if (h !== want[i]) return h > want[i]
  }
  return true
}

const known = new WeakMap<object, ServerFacts>()

/**
 * Asks the server its version (or takes `statedVersion`: tests plan for a release they name) and,
 * with a cluster, its shape from `system.clusters`; refuses a release older than 24.3 and a
 * cluster the server does not know. Remembered per client for `insertSettings`.
 */
export async function learnServer(ch: ClickHouse, statedVersion?: string): Promise<ServerFacts> {
  const version = statedVersion ?? (await rowsOf<{ version: string }>(ch, 'SELECT version() AS version'))[0].version
  if (!versionAtLeast(version, OLDEST_SUPPORTED_VERSION)) {
    throw new ConfigError(`the ClickHouse server at CLICKHOUSE_URL runs version ${version}; the service needs ${OLDEST_SUPPORTED_VERSION} or later`)
  }
  const facts: ServerFacts = { version }
  if (ch.cluster) {
    const shards = await rowsOf<{ replicas: string | number }>(
      ch,
      'SELECT shard_num, count() AS replicas FROM system.clusters WHERE cluster = {cluster:String} GROUP BY shard_num',
      { cluster: ch.cluster },
    )
    if (shards.length === 0) throw new ConfigError(`CLICKHOUSE_CLUSTER: the server at CLICKHOUSE_URL has no cluster named ${ch.cluster} (system.clusters)`)
    const replicas = shards.map((s) => Number(s.replicas))
    facts.cluster = { name: ch.cluster, shards: shards.length, hosts: replicas.reduce((a, b) => a + b, 0), replicasPerShard: Math.min(...replicas) }
  }
  known.set(ch.client, facts)
  return facts
}

/** What `learnServer` found for this client, if it ran. */
export function knownServer(ch: ClickHouse): ServerFacts | undefined {
  return known.get(ch.client)
}

/** What `learnServer` finds, asked once per client: a connection `beside` another has a client of its own. */
export async function serverFacts(ch: ClickHouse): Promise<ServerFacts> {
  return knownServer(ch) ?? learnServer(ch)
}

/**
 * Settings every insert carries, whatever the server's defaults and the user's profile say, so that
 * an insert that returned is readable by the next query:
 * - `async_insert = 0`: the service batches its own inserts (BatchInserter); a server-side async
 *   insert (on by default in 26.x) answered before its rows are written when a profile sets
 *   `wait_for_async_insert = 0`, and otherwise only waits longer.
 * - on a cluster, `distributed_foreground_insert = 1`: a Distributed table otherwise queues the
 *   rows and sends them to the shards later, after the insert answered;
 * - on a cluster whose shards have replicas, `insert_quorum` = every replica of a shard: the
 *   insert answers once each replica holds the rows, so a read through any replica sees them
 *   (a replica that is down stops inserts until it is back or leaves the cluster's definition).
 */
export function insertSettings(ch: ClickHouse): Record<string, number> {
  if (!ch.cluster) return SINGLE_SERVER_INSERT
  const shape = knownServer(ch)?.cluster
  if (!shape || shape.name !== ch.cluster) throw new Error('the cluster is learned (learnServer, run by migrateClickHouse) before the first insert')
  return clusterInsertSettings(shape)
}

/** `insertSettings` on a cluster of this shape. */
export function clusterInsertSettings(shape: ClusterShape): Record<string, number> {
  return {
    ...SINGLE_SERVER_INSERT,
    distributed_foreground_insert: 1,
    ...(shape.replicasPerShard > 1 ? { insert_quorum: shape.replicasPerShard, insert_quorum_timeout: INSERT_QUORUM_TIMEOUT_MS } : {}),
  }
}

const SINGLE_SERVER_INSERT = { async_insert: 0 } as const

/** A replica slow to take its copy fails the insert after this (the job retries) rather than holding it 10 minutes (the default). */
const INSERT_QUORUM_TIMEOUT_MS = 60_000

async function rowsOf<T>(ch: ClickHouse, query: string, query_params?: Record<string, unknown>): Promise<T[]> {
  const rs = await ch.client.query({ query, query_params, format: 'JSONEachRow' })
  return rs.json<T>()
}
