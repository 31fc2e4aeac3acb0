import { readFile, readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { FilterableFields } from '../domain/segment-filter.js'
import { fieldColumn, fieldColumnDefault } from '../domain/segment-sql.js'
import type { ClickHouse } from './client.js'
import { onCluster } from './cluster-layout.js'
import { inlineQueryParams } from './literals.js'
import { insertSettings, learnServer, versionAtLeast, type ServerFacts } from './server.js'

const migrationsDir = fileURLToPath(new URL('../../infra/migrations/clickhouse/', import.meta.url))

/** The record of what each migration file did on this database (`recordOutcome`). */
export const MIGRATIONS_TABLE = 'clickhouse_migrations'

/**
 * A migration file's first line of the form `-- needs: ClickHouse 24.11 (why)`: on an older
 * server the file is skipped, and the skip recorded, until a start on a release that has it.
 */
const NEEDS = /^--\s*needs:\s*ClickHouse\s+(\d+(?:\.\d+)*)/m

export interface MigrationOutcome {
  file: string
  /** `applied`, or `skipped: needs ClickHouse 24.11, the server is 24.8.14.39`. */
  outcome: string
  skipped: boolean
}

export interface MigrateOptions {
  /** Runs the whole migration holding a lock across processes (context.ts: a Postgres advisory lock). */
  serialize?: <T>(fn: () => Promise<T>) => Promise<T>
  /** The release to plan for instead of asking the server (tests state one). */
  serverVersion?: string
}

/**
 * Applies the migration files in order, each at most once per database: its statements are
 * idempotent DDL (IF NOT EXISTS), and what it did is recorded in `clickhouse_migrations` (applied,
 * or skipped for a release too old, with the server's version), so a later start runs only what
 * is new or was skipped on a release since upgraded. Then the field columns. On a cluster every
 * statement runs ON CLUSTER in the layout of cluster-layout.ts.
 */
export async function migrateClickHouse(ch: ClickHouse, opts: MigrateOptions = {}): Promise<MigrationOutcome[]> {
  const serialize = opts.serialize ?? ((fn) => fn())
  return serialize(async () => {
    const server = await learnServer(ch, opts.serverVersion)
    for (const statement of ledgerDdl(ch.database)) await runDdl(ch, statement)
    const recorded = await recordedOutcomes(ch)
    const outcomes: MigrationOutcome[] = []
    for (const m of await migrationFiles(ch.database)) {
      const before = recorded.get(m.file)
      if (before === APPLIED) continue
      const outcome = outcomeOn(server, m.sql)
      if (outcome === APPLIED) for (const statement of statementsOf(m.sql)) await runDdl(ch, statement)
      if (outcome !== before) await recordOutcome(ch, { file: m.file, outcome, version: server.version })
      outcomes.push({ file: m.file, outcome, skipped: outcome !== APPLIED })
    }
    await addFieldColumns(ch)
    return outcomes
  })
}

const APPLIED = 'applied'

/** The database and the record of migrations, before any migration file. */
function ledgerDdl(database: string): string[] {
  return [
    `CREATE DATABASE IF NOT EXISTS ${database}`,
    `CREATE TABLE IF NOT EXISTS ${database}.${MIGRATIONS_TABLE} (
  file String,
  outcome String,
  server_version String,
  recorded_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = ReplacingMergeTree(recorded_at)
ORDER BY file`,
  ]
}

/** The migration files in the order they apply, `{db}` filled in. */
async function migrationFiles(database: string): Promise<{ file: string; sql: string }[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort()
  return Promise.all(files.map(async (file) => ({ file, sql: (await readFile(path.join(migrationsDir, file), 'utf8')).replaceAll('{db}', database) })))
}

/**
 * Every DDL statement the first start on an empty database of this release runs, as sent (on a
 * cluster, ON CLUSTER in its layout): docs/clickhouse.md shows a cluster's, and a test keeps it so.
 */
export async function firstStartDdl(ch: Pick<ClickHouse, 'database' | 'cluster'>, server: Pick<ServerFacts, 'version'>): Promise<string[]> {
  const statements = [...ledgerDdl(ch.database)]
  for (const m of await migrationFiles(ch.database)) if (outcomeOn(server, m.sql) === APPLIED) statements.push(...statementsOf(m.sql))
  statements.push(...fieldColumnDdl(ch.database, FilterableFields))
  return statements.flatMap((s) => ddlFor(ch, s))
}

/** What a migration does on this server: applied, or skipped (and why) when it needs a newer release. */
export function outcomeOn(server: Pick<ServerFacts, 'version'>, sql: string): string {
  const needs = NEEDS.exec(sql)?.[1]
  if (needs && !versionAtLeast(server.version, needs)) return `skipped: needs ClickHouse ${needs}, the server is ${server.version}`
  return APPLIED
}

/** A migration file's statements, split at each `;` ending a line, comments left out. */
export function statementsOf(sql: string): string[] {
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean)
}

/** A DDL statement as this ClickHouse runs it: as written on one server, ON CLUSTER in the cluster's layout. */
export function ddlFor(ch: Pick<ClickHouse, 'database' | 'cluster'>, statement: string): string[] {
  return ch.cluster ? onCluster(statement, { database: ch.database, cluster: ch.cluster }) : [statement]
}

async function runDdl(ch: ClickHouse, statement: string): Promise<void> {
  for (const s of ddlFor(ch, statement)) await ch.client.command({ query: s })
}

async function recordedOutcomes(ch: ClickHouse): Promise<Map<string, string>> {
  const rs = await ch.client.query({
    query: `SELECT file, argMax(outcome, recorded_at) AS outcome FROM ${ch.database}.${MIGRATIONS_TABLE} GROUP BY file`,
    format: 'JSONEachRow',
  })
  return new Map((await rs.json<{ file: string; outcome: string }>()).map((r) => [r.file, r.outcome]))
}

async function recordOutcome(ch: ClickHouse, r: { file: string; outcome: string; version: string }): Promise<void> {
  await ch.client.command({
    query: inlineQueryParams(`INSERT INTO ${ch.database}.${MIGRATIONS_TABLE} (file, outcome, server_version) SELECT {file:String}, {outcome:String}, {version:String}`, r),
    clickhouse_settings: insertSettings(ch),
  })
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
  for (const statement of fieldColumnDdl(ch.database, missing)) await runDdl(ch, statement)
}

function fieldColumnDdl(database: string, missing: readonly (typeof FilterableFields)[number][]): string[] {
  const table = `${database}.profile_snapshots`
  return [
    `ALTER TABLE ${table} ${missing.map((f) => `ADD COLUMN IF NOT EXISTS ${fieldColumn(f)} String DEFAULT ${fieldColumnDefault(f)}`).join(', ')}`,
    `ALTER TABLE ${table} ${missing.map((f) => `MATERIALIZE COLUMN ${fieldColumn(f)}`).join(', ')}`,
  ]
}
