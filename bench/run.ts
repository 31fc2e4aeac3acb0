// `make bench`: every benchmark in one run on this machine, each part in a process of its own,
// printed as one table and written to bench/results/<time>.json.
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { benchExport, type ExportBenchResult } from './export.js'
import { root, runPart } from './lib.js'

interface Ingest {
  mode: string
  objects: number
  acceptedPerSecond: number
  appliedPerSecond: number
  apiP50Ms: number
  apiP99Ms: number
  fixedRate?: Record<'apiAlone' | 'withWorkers', { rps: number; failures: number; failureReasons: Record<string, number>; p50: number; p99: number }>
}
interface Raw {
  pgUpsertRowsPerSecond: number
  chInsertRowsPerSecond: number
}
interface Reads {
  subscriptionGet: { requestsPerSecond: number; p50Ms: number; p99Ms: number; failures: number }
  exportIds: { requestsPerSecond: number; p50Ms: number; p99Ms: number; failures: number }
}

const USERS = Number(process.env.BENCH_USERS ?? 100_000)

async function main() {
  const startedAt = new Date().toISOString()
  const raw = (await runPart('bench/raw.ts', [String(USERS)])) as Raw
  const embedded = (await runPart('bench/ingest.ts', ['embedded', String(USERS)])) as Ingest
  const split = (await runPart('bench/ingest.ts', ['split', String(USERS)])) as Ingest
  const reads = (await runPart('bench/reads.ts')) as Reads
  const exports: ExportBenchResult[] = []
  for (const users of [100_000, 1_000_000]) exports.push(await benchExport({ users }))

  const ratio = (a: number, b: number) => Number((a / b).toFixed(3))
  const rows: [string, string, string][] = [
    ['raw Postgres batched upsert (attribute rows)', `${raw.pgUpsertRowsPerSecond} rows/s`, 'baseline'],
    ['raw ClickHouse insert (event rows)', `${raw.chInsertRowsPerSecond} rows/s`, 'baseline'],
  ]
  for (const r of [embedded, split]) {
    rows.push([`${r.mode}: accepted at the API`, `${r.acceptedPerSecond} objects/s`, ''])
    rows.push([
      `${r.mode}: applied end to end`,
      `${r.appliedPerSecond} objects/s`,
      `${ratio(r.appliedPerSecond, raw.pgUpsertRowsPerSecond)} of raw PG, ${ratio(r.appliedPerSecond, raw.chInsertRowsPerSecond)} of raw CH`,
    ])
    rows.push([`${r.mode}: API latency under full load`, `p50 ${r.apiP50Ms} ms, p99 ${r.apiP99Ms} ms`, ''])
  }
  if (split.fixedRate) {
    const { apiAlone, withWorkers } = split.fixedRate
    rows.push([`split: API alone at ${apiAlone.rps} req/s`, `p50 ${apiAlone.p50} ms, p99 ${apiAlone.p99} ms`, `goal p99 < 20 ms; ${apiAlone.failures} failed`])
    rows.push([`split: API beside applying worker at ${withWorkers.rps} req/s`, `p50 ${withWorkers.p50} ms, p99 ${withWorkers.p99} ms`, `${withWorkers.failures} failed ${JSON.stringify(withWorkers.failureReasons)}`])
  }
  for (const e of exports) rows.push([`export of ${e.users} users`, `${e.usersPerSecond} users/s`, `peak RSS ${e.peakRssMb} MiB`])
  rows.push(['/subscription/status/get (10 keys)', `${reads.subscriptionGet.requestsPerSecond} req/s`, `p99 ${reads.subscriptionGet.p99Ms} ms`])
  rows.push(['/users/export/ids (10 users)', `${reads.exportIds.requestsPerSecond} req/s`, `p99 ${reads.exportIds.p99Ms} ms`])

  const width = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length)))
  console.log(rows.map((r) => r.map((c, i) => c.padEnd(width[i])).join('  ')).join('\n'))
  const dir = path.join(root, 'bench/results')
  mkdirSync(dir, { recursive: true })
  const file = path.join(dir, `${startedAt.replace(/[:.]/g, '-')}.json`)
  writeFileSync(file, `${JSON.stringify({ startedAt, users: USERS, raw, embedded, split, reads, exports }, null, 2)}\n`)
  console.log(`\nwritten to ${path.relative(root, file)}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
