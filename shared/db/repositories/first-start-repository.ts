import { query, type Queryable } from '../pool.js'

/** Advisory lock key of the first-start set-up (the migrations hold 724153). */
const FIRST_START_LOCK = 724154

/**
 * Holds the first-start lock until the transaction ends: of two processes starting together on an
 * empty database, one creates the default workspace and its credentials, the other then finds it.
 */
export async function lockFirstStart(tx: Queryable): Promise<void> {
  await query(tx, 'lockFirstStart', 'SELECT pg_advisory_xact_lock($1)', [FIRST_START_LOCK])
}
