import { readFile, readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ClickHouse } from './client.js'

const migrationsDir = fileURLToPath(new URL('../../infra/migrations/clickhouse/', import.meta.url))

/** ClickHouse migrations are idempotent DDL (IF NOT EXISTS), applied in file order on every start. */
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
}
