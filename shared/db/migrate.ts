import { readFile, readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { withDefaultUser } from './pool.js'

const migrationsDir = fileURLToPath(new URL('../../infra/migrations/postgres/', import.meta.url))

/** Creates the database named in the URL when it is missing (connecting to `postgres`). */
export async function ensureDatabase(databaseUrl: string, template?: string): Promise<void> {
  const url = new URL(withDefaultUser(databaseUrl))
  const name = decodeURIComponent(url.pathname.slice(1))
  url.pathname = '/postgres'
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])
    if (exists.rowCount === 0) {
      const ident = pg.escapeIdentifier
      const from = template ? ` TEMPLATE ${ident(template)}` : ''
      try {
        await client.query(`CREATE DATABASE ${ident(name)}${from}`)
      } catch (e) {
        // Another process created it first: 42P04, or 23505 when both got past the existence check at once.
        const code = (e as { code?: string }).code
        if (code !== '42P04' && code !== '23505') throw e
      }
    }
  } finally {
    await client.end()
  }
}

export async function pendingMigrations(db: pg.Pool | pg.Client): Promise<string[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort()
  const has = await db.query(`SELECT to_regclass('schema_migrations') AS t`)
  if (!has.rows[0].t) return files
  const done = await db.query<{ name: string }>('SELECT name FROM schema_migrations')
  const applied = new Set(done.rows.map((r) => r.name))
  return files.filter((f) => !applied.has(f))
}

/** Applies every migration file not yet recorded, each in its own transaction, under an advisory lock. */
export async function migratePostgres(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl)
  const client = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await client.connect()
  try {
    await client.query('SELECT pg_advisory_lock(724153)')
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    )
    const pending = await pendingMigrations(client)
    for (const file of pending) {
      const sql = await readFile(path.join(migrationsDir, file), 'utf8')
      await client.query('BEGIN')
      try {
        await client.query(sql)
        await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file])
        await client.query('COMMIT')
      } catch (e) {
        await client.query('ROLLBACK')
        throw new Error(`migration ${file} failed: ${(e as Error).message}`)
      }
    }
    return pending
  } finally {
    await client.query('SELECT pg_advisory_unlock(724153)').catch(() => {})
    await client.end()
  }
}
