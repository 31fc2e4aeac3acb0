import { readFile, readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { FilterableFields } from '../domain/segment-filter.js'
import { fieldColumn, fieldColumnDefault } from '../domain/segment-sql.js'
import type { ClickHouse } from './client.js'

const migrationsDir = fileURLToPath(new URL('../../infra/migrations/clickhouse/', import.meta.url))

/** ClickHouse migrations are idempotent DDL (IF NOT EXISTS), applied in file order on every start, then the field columns. */
export async function migrateClickHouse(ch: ClickHouse): Promise<void> {
  await ch.client.command({ query: `CREATE DATABASE IF NOT EXISTS ${ch.database}` })
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort()
  for (const file of files) {
    const sql = (await readFile(path.join(migrationsDir, file), 'utf8')).replaceAll('{db}', ch.database)
    const statements = sql
      .split(/;\s*$/m)
      .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
      .filter(Boolean)
    for (const statement of statements) await ch.client.command({ query: statement })
  }
  await addFieldColumns(ch)
}

/**
 * The standard-field columns of `profile_snapshots` (segment-sql.ts), derived from the filterable
 * fields rather than listed in a migration file. Columns a start adds are filled in for the rows
 * already stored by one mutation, once: until it is done those rows work theirs out from the
 * record on read (the same values, at the old cost).
 */
async function addFieldColumns(ch: ClickHouse): Promise<void> {
  const rs = await ch.client.query({
    query: `SELECT name FROM system.columns WHERE database = {db:String} AND table = 'profile_snapshots'`,
    query_params: { db: ch.database },
    format: 'JSONEachRow',
  })
  const present = new Set((await rs.json<{ name: string }>()).map((r) => r.name))
  const missing = FilterableFields.filter((f) => !present.has(fieldColumn(f)))
  if (!missing.length) return
  const table = `${ch.database}.profile_snapshots`
  await ch.client.command({
    query: `ALTER TABLE ${table} ${missing.map((f) => `ADD COLUMN IF NOT EXISTS ${fieldColumn(f)} String DEFAULT ${fieldColumnDefault(f)}`).join(', ')}`,
  })
  await ch.client.command({ query: `ALTER TABLE ${table} ${missing.map((f) => `MATERIALIZE COLUMN ${fieldColumn(f)}`).join(', ')}` })
}
