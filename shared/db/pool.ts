import os from 'node:os'
import pg from 'pg'
import { RetryableError, isRetryable } from '../errors.js'

export type Pool = pg.Pool
export type Queryable = pg.Pool | pg.PoolClient

// int8 columns (ids, counts) fit in a JS number for this service's ranges.
pg.types.setTypeParser(20, (v) => Number(v))

/** SQL for a timestamptz as JavaScript writes times: ISO 8601 UTC text with milliseconds (text order is time order). */
export const isoText = (expr: string) => `to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** A URL without a user name connects as PGUSER or the OS user (trust auth on loopback). */
export function withDefaultUser(databaseUrl: string): string {
  const url = new URL(databaseUrl)
  if (!url.username) url.username = process.env.PGUSER || os.userInfo().username
  return url.toString()
}

/**
 * How long an idle connection stays open (pg-pool's default is 10 s). A new backend pays again for
 * every shared buffer it touches (a page fault each, in its own page tables) and for its catalog
 * caches: a mixed burst after a 15 s lull cost Postgres half as much again on fresh backends.
 * Ten minutes, HikariCP's default: longer than a sender's usual lull.
 */
export const IDLE_CONNECTION_MS = 10 * 60_000

/**
 * A worker host cut off mid-transaction leaves its session holding row and advisory locks until
 * the server notices; by the kernel's keepalive defaults, hours. These end such a session within
 * about a minute (keepalive probes, and an open transaction left idle), so other hosts go on.
 */
const DEAD_CLIENT_SETTINGS = '-c tcp_keepalives_idle=20 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=4 -c idle_in_transaction_session_timeout=60000'

export function createPool(databaseUrl: string, max = 20): Pool {
  // JIT off for our sessions: every statement here touches a bounded set of rows by index, yet a
  // batch's look-up over thousands of ids is costed above jit_optimize_above_cost, and compiling
  // it takes longer than running it. Per session, so the server's setting for others stays.
  // allowExitOnIdle: an idle connection's long timer must not keep a process alive.
  const pool = new pg.Pool({
    connectionString: withDefaultUser(databaseUrl),
    max,
    options: `-c jit=off ${DEAD_CLIENT_SETTINGS}`,
    keepAlive: true,
    idleTimeoutMillis: IDLE_CONNECTION_MS,
    allowExitOnIdle: true,
  })
  // A backend killed under an idle client must not crash the process.
  pool.on('error', () => {})
  // Nor under a checked-out one: pg-pool drops its own listener while a client is handed out, so
  // an error arriving between two queries (or right behind the connect handshake, before the
  // caller has the client) would be an uncaught 'error' event. The failed query rejects anyway,
  // and the pool discards a client that is no longer queryable when it is released.
  pool.on('connect', (client) => client.on('error', () => {}))
  return pool
}

const ARRAY_SPECIAL = /["\\]/
const ARRAY_SPECIALS = /["\\]/g

/**
 * A flat array of strings or numbers as Postgres reads an array parameter, made by one join. pg's
 * own serializer appends element by element: a track batch passes arrays of thousands of
 * identifiers and ids, and their serialization was a twentieth of what the worker allocated.
 * Undefined for anything else (nulls, nested arrays, dates, buffers), which pg serializes.
 */
export function arrayLiteral(values: readonly unknown[]): string | undefined {
  if (values.length === 0) return '{}'
  let numbers = true
  let plain = true
  for (const v of values) {
    if (typeof v === 'string') {
      numbers = false
      if (ARRAY_SPECIAL.test(v)) plain = false
    } else if (typeof v !== 'number') return undefined
  }
  if (numbers) return `{${values.join(',')}}`
  if (plain) return `{"${values.join('","')}"}`
  return `{${values.map((v) => (typeof v === 'number' ? String(v) : `"${(v as string).replace(ARRAY_SPECIALS, '\\$&')}"`)).join(',')}}`
}

/** One tagged query: the tag shows up in Postgres logs; connection errors become retryable. */
export async function query<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Queryable,
  tag: string,
  sql: string,
  values: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  try {
    const params = values.map((v) => (Array.isArray(v) ? (arrayLiteral(v) ?? v) : v))
    return await db.query<R>(`/* ${tag} */ ${sql}`, params)
  } catch (e) {
    if (isRetryable(e)) throw new RetryableError(`postgres: ${(e as Error).message}`, e)
    throw e
  }
}

export async function withTransaction<T>(pool: Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient
  try {
    client = await pool.connect()
  } catch (e) {
    throw new RetryableError(`postgres: ${(e as Error).message}`, e)
  }
  let broken = false
  try {
    await client.query('BEGIN')
    const result = await fn(client)
    await client.query('COMMIT')
    return result
  } catch (e) {
    try {
      await client.query('ROLLBACK')
    } catch {
      broken = true
    }
    if (isRetryable(e)) {
      broken = true
      throw e instanceof RetryableError ? e : new RetryableError(`postgres: ${(e as Error).message}`, e)
    }
    throw e
  } finally {
    client.release(broken)
  }
}
