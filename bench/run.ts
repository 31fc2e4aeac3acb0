// `make bench`: the benchmarks in one run on this machine, each part in a process of its own,
// printed as one table (every figure beside its goal) and written to bench/results/<time>.json.
// The parts are named as arguments (`tsx bench/run.ts mixed soak`) or in BENCH_PARTS (default
// raw,ingest,mixed,identity,sweep,segments,reads,export; `ingest` is embedded,split; `soak` and `lull`
// only when named). The ingest, mixed, soak, lull, identity, sweep and segments parts run on the
// preloaded database. Everything runs against the bench's own Postgres (bench/postgres.ts) unless
// BENCH_PG=machine.
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { perThousandObjects, type Cores } from './cpu.js'
import { benchExport, type ExportBenchResult } from './export.js'
import { root, runPart } from './lib.js'
import { dropPreloaded } from './preload.js'
import type { LockWaits } from './pg-activity.js'
import { ownPostgres, startBenchPostgres, stopBenchPostgres } from './postgres.js'

interface LatencyFigure {
  count: number
  p50Ms: number
  p99Ms: number
  failures: number
  failureReasons: Record<string, number>
  cutOff: number
}
interface Ingest {
  mode: string
  objects: number
  attributeRows: number
  eventRows: number
  acceptedPerSecond: number
  appliedPerSecond: number | null
  seconds: number | null
  apiP50Ms: number
  apiP99Ms: number
  retried429: number
  smallRequests?: LatencyFigure & {
    rps: number
    allDoneAfterLastSendMs: number | null
    notDoneAtDeadline: number
    cores?: Cores
    cpuMsPerRequest?: Record<string, number>
  }
  acceptedToDone?: { rps: number; p50Ms: number; p99Ms: number; pollMs: number; requests: number }
  duringDrain?: LatencyFigure & { rps: number; secondsWhileDraining: number; backlogObjects: number }
}
interface SegmentSize {
  segmentSize: number | null
  rps: number
  atRest: LatencyFigure
  /** The reads of every drain, pooled. */
  duringDrain: LatencyFigure
  /** Each drain's reads and slowest one (absent from older results, of one drain). */
  drains?: { reads: number; slowestMs: number; seconds: number }[]
  secondsWhileDraining: number
  backlogObjects: number
}
interface Raw {
  pgUpsertRowsPerSecond: number
  chInsertRowsPerSecond: number
}
/** The mixed part reports what an ingest part does, plus its exactness check. */
type Mixed = Pick<Ingest, 'objects' | 'attributeRows' | 'eventRows' | 'acceptedPerSecond' | 'appliedPerSecond' | 'seconds' | 'apiP99Ms'> & {
  check: { exact: boolean; mismatches: number; sampledUsers: number; examples: string[] }
  cpuSeconds: Record<string, number>
  /** Absent from older results. */
  pageFaults?: Record<string, number>
  pageFaultMicros: number
  workerThreads: Record<string, number>
  cores: { accepting: Cores; draining?: Cores }
  lockWaits: LockWaits
  /** Absent from older results, of a part without a warm-up. */
  warmUp?: { requests: number; appliedPerSecond: number | null }
}
interface SoakMinute {
  appliedPerSecond: number
  small: { p50Ms: number; p99Ms: number; failures: number }
}
interface Soak {
  seconds: number
  rps: number
  objectsPerSecondSent: number
  firstMinute: SoakMinute
  lastMinute: SoakMinute
  /** faultsPerSecond, postgres: absent from older results. */
  minutes: (SoakMinute & {
    cores: Record<string, number>
    faultsPerSecond?: Record<string, number>
    postgres?: { walMbPerSecond: number; fullPageImagesPerSecond: number; checkpointsBegun: number }
  })[]
  /** Absent from older results, of a soak without a warm-up. */
  warmUpSeconds?: number
  warmUp?: SoakMinute
  mixedAccepted: number
  mixedRequests: number
  allDoneAfterLastSendMs: number | null
  deadRowShareAtStart: Record<string, number>
  deadRowShareMax: Record<string, number>
  deadRowShareLast: Record<string, number>
  check: { exact: boolean; mismatches: number }
}
interface Lull {
  lullSeconds: number
  bursts: { objects: number; appliedPerSecond: number | null; cpuPerThousand: Record<string, number>; faultsPerThousand: Record<string, number> }[]
  check: { exact: boolean; mismatches: number }
}
interface Sweep {
  operations: { merges: number; deletes: number }
  sweepSeconds: number | null
  acceptedToDone: { rps: number; requests: number; p50Ms: number; p99Ms: number; maxMs: number; failedApplying: number }
  whileSweeping: { requests: number; maxMs: number }
}
interface Reads {
  subscriptionGet: { requestsPerSecond: number; p50Ms: number; p99Ms: number; failures: number }
  exportIds: { requestsPerSecond: number; p50Ms: number; p99Ms: number; failures: number }
}
interface IdentityPhase {
  operationsPerSecond: number
  operationsDone: number
  operations: number
  capped: boolean
}
interface Identity {
  preloaded: { events: number }
  singleMerge: { p99Ms: number }
  merges: IdentityPhase
  deletes: IdentityPhase
}

const USERS = Number(process.env.BENCH_USERS ?? 100_000)
const EVENTS = Number(process.env.BENCH_PRELOAD_EVENTS ?? 10_000_000)
const ALIASES: Record<string, string[]> = { ingest: ['embedded', 'split'] }
const NAMED = process.argv.slice(2).join(',') || process.env.BENCH_PARTS || 'raw,ingest,mixed,pool,identity,sweep,segments,reads,export'
/** The pool part's worker process counts (the README's scaled mode on one host). */
const POOL_WORKERS = (process.env.BENCH_POOL_WORKERS ?? '1,2,4').split(',').map(Number)
const PARTS = new Set(NAMED.split(',').flatMap((p) => ALIASES[p.trim()] ?? [p.trim()]))

/** The raw floor for one ingest run: its rows at the raw rates, against the time it took. */
function floorOf(r: { objects: number; attributeRows: number; eventRows: number; seconds: number | null }, raw: Raw) {
  const floorSeconds = r.attributeRows / raw.pgUpsertRowsPerSecond + r.eventRows / raw.chInsertRowsPerSecond
  return {
    floorSeconds: Number(floorSeconds.toFixed(3)),
    floorObjectsPerSecond: Math.round(r.objects / floorSeconds),
    ratio: r.seconds ? Number((floorSeconds / r.seconds).toFixed(3)) : null,
  }
}

const n = (x: number) => x.toLocaleString('en-US')
const verdict = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? 'met' : 'MISSED')
const coresText = (c?: Cores) => (c ? Object.entries(c).map(([name, cores]) => `${name} ${cores}`).join(' ') : '-')

async function main() {
  const startedAt = new Date().toISOString()
  const partSeconds: Record<string, number> = {}
  const timed = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const t = performance.now()
    console.error(`[bench] ${name} ...`)
    const r = await f()
    partSeconds[name] = Math.round((performance.now() - t) / 100) / 10
    console.error(`[bench] ${name}: ${partSeconds[name]} s`)
    return r
  }
  const out: Record<string, unknown> = { startedAt, users: USERS, parts: [...PARTS] }
  const server = ownPostgres ? await startBenchPostgres() : undefined
  out.postgres = server ? { own: true, url: server.url } : { own: false, url: process.env.BENCH_DATABASE_URL ?? 'postgres://127.0.0.1:5432' }

  const raw = PARTS.has('raw') ? await timed('raw', () => runPart('bench/raw.ts', [String(USERS)]) as Promise<Raw>) : undefined
  const preloads: unknown[] = []
  const identity: Identity[] = []
  const ingest: Ingest[] = []
  let segments: SegmentSize | undefined
  const rawMixed = PARTS.has('mixed') || PARTS.has('pool') ? await timed('raw (mixed rows)', () => runPart('bench/raw.ts', [String(USERS), 'mixed']) as Promise<Raw>) : undefined
  const pool: { workers: number; mixed: Mixed; friendly: Ingest }[] = []
  let mixed: Mixed | undefined
  let soak: Soak | undefined
  let lull: Lull | undefined
  let sweep: Sweep | undefined
  if (['embedded', 'split', 'mixed', 'pool', 'soak', 'lull', 'identity', 'sweep', 'segments'].some((p) => PARTS.has(p))) {
    // BENCH_REUSE_PRELOAD=1 keeps a preload that matches (a cache: BENCH_PRELOAD_DIR, BENCH_PRELOAD_DB).
    const fresh = process.env.BENCH_REUSE_PRELOAD ? [] : ['--fresh']
    // Identity is measured at a tenth of the events, then at all of them, in the same preload.
    if (PARTS.has('identity')) {
      preloads.push(await timed('preload', () => runPart('bench/preload.ts', [...fresh, String(Math.round(EVENTS / 10))])))
      identity.push(await timed('identity (1/10 of the events)', () => runPart('bench/identity.ts', ['0']) as Promise<Identity>))
      preloads.push(await timed('preload top-up', () => runPart('bench/preload.ts', [String(EVENTS)])))
      identity.push(await timed('identity', () => runPart('bench/identity.ts', ['1']) as Promise<Identity>))
    } else {
      preloads.push(await timed('preload', () => runPart('bench/preload.ts', [...fresh, String(EVENTS)])))
    }
    for (const mode of ['embedded', 'split']) {
      if (PARTS.has(mode)) ingest.push(await timed(mode, () => runPart('bench/ingest.ts', [mode, String(USERS)]) as Promise<Ingest>))
    }
    if (PARTS.has('mixed')) mixed = await timed('mixed', () => runPart('bench/mixed.ts', [String(USERS)]) as Promise<Mixed>)
    // The same loads with 1, 2 and 4 worker processes, one after another on the same preload.
    if (PARTS.has('pool')) {
      for (const workers of POOL_WORKERS) {
        const env = { BENCH_WORKERS: String(workers) }
        const m = await timed(`pool: mixed, ${workers} workers`, () => runPart('bench/mixed.ts', [String(USERS)], env) as Promise<Mixed>)
        const f = await timed(`pool: friendly, ${workers} workers`, () => runPart('bench/ingest.ts', ['split', String(USERS)], { ...env, BENCH_INGEST_FULL_ONLY: '1' }) as Promise<Ingest>)
        pool.push({ workers, mixed: m, friendly: f })
      }
    }
    // Near capacity: three fifths of the mixed part's applied rate when it ran (BENCH_SOAK_RPS
    // overrides). A burst is drained on the whole machine; a send that lasts shares it with its
    // own acceptance: a ten-minute soak holds about two thirds of the burst's rate.
    const soakRps = !process.env.BENCH_SOAK_RPS && mixed?.appliedPerSecond ? [String(Math.max(1, Math.round((0.6 * mixed.appliedPerSecond) / 225)))] : []
    if (PARTS.has('soak')) soak = await timed('soak', () => runPart('bench/soak.ts', soakRps) as Promise<Soak>)
    if (PARTS.has('lull')) lull = await timed('lull', () => runPart('bench/lull.ts') as Promise<Lull>)
    if (PARTS.has('sweep')) sweep = await timed('sweep', () => runPart('bench/sweep.ts') as Promise<Sweep>)
    if (PARTS.has('segments')) segments = await timed('segments', () => runPart('bench/segment-size.ts', [String(USERS)]) as Promise<SegmentSize>)
  }
  const reads = PARTS.has('reads') ? await timed('reads', () => runPart('bench/reads.ts') as Promise<Reads>) : undefined
  const exports: ExportBenchResult[] = []
  if (PARTS.has('export')) for (const users of [100_000, 1_000_000]) exports.push(await timed(`export ${users}`, () => benchExport({ users })))
  if (preloads.length && !process.env.BENCH_KEEP_PRELOAD && !process.env.BENCH_REUSE_PRELOAD) await dropPreloaded()
  if (server?.startedHere) stopBenchPostgres()

  const rows: [string, string, string, string][] = [['Measure', 'Result', 'Goal (issues 12, 14)', '']]
  if (raw) {
    rows.push(['raw Postgres: one connection, 1,000-row upserts merging jsonb', `${n(raw.pgUpsertRowsPerSecond)} rows/s`, 'floor', ''])
    rows.push(['raw ClickHouse (chDB): 10,000-row inserts of the event rows', `${n(raw.chInsertRowsPerSecond)} rows/s`, 'floor', ''])
  }
  const ingestOut: Record<string, unknown> = {}
  for (const r of ingest) {
    const floor = raw ? floorOf(r, raw) : undefined
    ingestOut[r.mode] = { ...r, floor }
    rows.push([`${r.mode}: accepted at the API (${n(r.objects)} objects, 32 in flight)`, `${n(r.acceptedPerSecond)} objects/s`, '', r.retried429 ? `${n(r.retried429)} x 429 retried` : ''])
    rows.push([
      `${r.mode}: applied end to end (first request to last done)`,
      r.appliedPerSecond === null ? 'not all applied' : `${n(r.appliedPerSecond)} objects/s`,
      '>= 25,000 objects/s',
      verdict(r.appliedPerSecond === null ? false : r.appliedPerSecond >= 25_000),
    ])
    if (floor) {
      rows.push([
        `${r.mode}: ratio to the raw floor (floor ${n(floor.floorObjectsPerSecond)} objects/s)`,
        floor.ratio === null ? '-' : String(floor.ratio),
        '>= 0.2 (aim 0.5)',
        verdict(floor.ratio !== null && floor.ratio >= 0.2),
      ])
    }
    rows.push([`${r.mode}: API latency under that load`, `p50 ${r.apiP50Ms} ms, p99 ${r.apiP99Ms} ms`, '', ''])
    const s = r.smallRequests
    if (s) {
      rows.push([
        `${r.mode}: small requests at ${n(s.rps)}/s, open loop, workers running`,
        `p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms; ${s.failures} failed ${s.failures ? JSON.stringify(s.failureReasons) : ''}`.trim(),
        'p99 < 50 ms (aim 20)',
        verdict(s.p99Ms < 50 && s.failures === 0),
      ])
      if (s.cores && s.cpuMsPerRequest) {
        rows.push([
          `${r.mode}: those requests: cores in use (of ${os.cpus().length}), first send to last done; CPU per request`,
          `${coresText(s.cores)}; ${Object.entries(s.cpuMsPerRequest).map(([name, ms]) => `${name} ${ms} ms`).join(', ')}`,
          '',
          '',
        ])
      }
      rows.push([
        `${r.mode}: those requests all done after the last send`,
        s.allDoneAfterLastSendMs === null ? `${n(s.notDoneAtDeadline)} not done after 120 s` : `${n(s.allDoneAfterLastSendMs)} ms`,
        '< 5 s',
        verdict(s.allDoneAfterLastSendMs !== null && s.allDoneAfterLastSendMs < 5000),
      ])
    }
    const d = r.duringDrain
    if (d) {
      rows.push([
        `${r.mode}: API, small requests at ${n(d.rps)}/s while ${n(d.backlogObjects)} objects drain (${d.secondsWhileDraining} s)`,
        `p50 ${d.p50Ms} ms, p99 ${d.p99Ms} ms; ${d.cutOff} cut off${d.failures > d.cutOff ? `, ${d.failures - d.cutOff} x 429` : ''}`,
        'p99 < 100 ms, 0 cut off',
        verdict(d.p99Ms < 100 && d.cutOff === 0),
      ])
    }
    const a = r.acceptedToDone
    if (a) {
      rows.push([
        `${r.mode}: accepted -> done at ${a.rps} requests/s (polled every ${a.pollMs} ms)`,
        `p50 ${a.p50Ms} ms, p99 ${a.p99Ms} ms`,
        'p99 < 250 ms',
        verdict(a.p99Ms < 250),
      ])
    }
  }
  const mixedFloor = mixed && rawMixed ? floorOf(mixed, rawMixed) : undefined
  if (rawMixed) {
    rows.push(['raw Postgres, mixed attribute rows (~13 fields, 90% updates)', `${n(rawMixed.pgUpsertRowsPerSecond)} rows/s`, 'floor', ''])
    rows.push(['raw ClickHouse, mixed event rows (nested properties)', `${n(rawMixed.chInsertRowsPerSecond)} rows/s`, 'floor', ''])
  }
  if (mixed) {
    const friendly = ingest.find((r) => r.mode === 'split')
    rows.push([
      `mixed (split, 225 users a request of 100,000, 13-field attributes): applied end to end`,
      mixed.appliedPerSecond === null ? 'not all applied' : `${n(mixed.appliedPerSecond)} objects/s`,
      friendly?.appliedPerSecond ? `friendly load: ${n(friendly.appliedPerSecond)} objects/s` : '',
      '',
    ])
    if (mixed.warmUp) {
      rows.push([
        `mixed: its warm-up, the first ${n(mixed.warmUp.requests)} requests after the services start (not in the figures around it)`,
        mixed.warmUp.appliedPerSecond === null ? 'not all applied' : `${n(mixed.warmUp.appliedPerSecond)} objects/s`,
        '',
        '',
      ])
    }
    if (mixedFloor) {
      rows.push([
        `mixed: ratio to its raw floor (floor ${n(mixedFloor.floorObjectsPerSecond)} objects/s)`,
        mixedFloor.ratio === null ? '-' : String(mixedFloor.ratio),
        '>= 0.3 (aim 0.5)',
        verdict(mixedFloor.ratio !== null && mixedFloor.ratio >= 0.3),
      ])
    }
    rows.push(['mixed: CPU seconds per 1,000 objects, first request to last done', perThousandObjects(mixed.cpuSeconds, mixed.objects), '', ''])
    const { pageFaults, pageFaultMicros } = mixed
    if (pageFaults) {
      const share = (name: string) => Math.round((100 * pageFaults[name] * pageFaultMicros) / 1e6 / mixed.cpuSeconds[name])
      rows.push([
        `mixed: minor page faults per 1,000 objects (one costs ${pageFaultMicros} us of CPU here), and that cost's share of each one's CPU`,
        Object.keys(pageFaults)
          .map((name) => `${name} ${n(Math.round((pageFaults[name] * 1000) / mixed.objects))} (${share(name)}%)`)
          .join(', '),
        '',
        '',
      ])
    }
    rows.push([
      'mixed: worker CPU seconds by thread (main, node: V8 helpers and libuv pool, engine merges, engine other)',
      Object.entries(mixed.workerThreads).map(([kind, s]) => `${kind} ${s}`).join(', '),
      '',
      '',
    ])
    rows.push([`mixed: cores in use (of ${os.cpus().length}) while the API accepts the load`, coresText(mixed.cores.accepting), '', ''])
    rows.push([`mixed: cores in use (of ${os.cpus().length}) from then to the last request done`, coresText(mixed.cores.draining), '', ''])
    const { samples, running, waitingForLock } = mixed.lockWaits
    rows.push([
      'mixed: Postgres statements running, sampled every 100 ms; of them waiting for a lock',
      `${n(running)} in ${n(samples)} samples; ${n(waitingForLock)} waiting (${running ? Math.round((100 * waitingForLock) / running) : 0}%)`,
      '',
      '',
    ])
    rows.push([
      `mixed: every object exact (${n(mixed.check.sampledUsers)} users compared, all events and incs counted)`,
      mixed.check.exact ? 'exact' : `${n(mixed.check.mismatches)} mismatches: ${mixed.check.examples.slice(0, 3).join('; ')}`,
      'exact',
      verdict(mixed.check.exact),
    ])
  }
  const poolOut = pool.map((p) => ({ ...p, mixedFloor: rawMixed ? floorOf(p.mixed, rawMixed) : undefined, friendlyFloor: raw ? floorOf(p.friendly, raw) : undefined }))
  const one = poolOut.find((p) => p.workers === 1)
  for (const p of poolOut) {
    const against = (now: number | null | undefined, base: number | null | undefined) =>
      now && base && p.workers !== 1 ? ` (${Math.round((100 * (now - base)) / base)}% against 1)` : ''
    const within = (now: number | null | undefined, base: number | null | undefined) => (p.workers === 1 || !now || !base ? undefined : now >= 0.9 * base)
    rows.push([
      `pool: mixed with ${p.workers} worker processes, applied; ratio to its raw floor`,
      `${p.mixed.appliedPerSecond === null ? 'not all applied' : `${n(p.mixed.appliedPerSecond)} objects/s`}; ${p.mixedFloor?.ratio ?? '-'}${against(p.mixed.appliedPerSecond, one?.mixed.appliedPerSecond)}; ${p.mixed.check.exact ? 'exact' : 'NOT EXACT'}`,
      p.workers === 1 ? '' : 'within 10% of 1',
      verdict(within(p.mixed.appliedPerSecond, one?.mixed.appliedPerSecond) === false || !p.mixed.check.exact ? false : within(p.mixed.appliedPerSecond, one?.mixed.appliedPerSecond)),
    ])
    rows.push([
      `pool: friendly with ${p.workers} worker processes, applied; ratio to its raw floor`,
      `${p.friendly.appliedPerSecond === null ? 'not all applied' : `${n(p.friendly.appliedPerSecond)} objects/s`}; ${p.friendlyFloor?.ratio ?? '-'}${against(p.friendly.appliedPerSecond, one?.friendly.appliedPerSecond)}`,
      p.workers === 1 ? '' : 'within 10% of 1',
      verdict(within(p.friendly.appliedPerSecond, one?.friendly.appliedPerSecond)),
    ])
  }
  if (soak) {
    const f = soak.firstMinute
    const l = soak.lastMinute
    const within = (a: number, b: number) => Math.abs(b - a) <= 0.2 * a
    rows.push([
      `soak: mixed load at ${soak.rps} requests/s (${n(soak.objectsPerSecondSent)} objects/s) for ${soak.seconds} s, applied, first / last minute`,
      `${n(f.appliedPerSecond)} / ${n(l.appliedPerSecond)} objects/s`,
      'within 20%',
      verdict(within(f.appliedPerSecond, l.appliedPerSecond)),
    ])
    rows.push([
      'soak: small requests alongside, p99 first / last minute',
      `${f.small.p99Ms} / ${l.small.p99Ms} ms`,
      'within 20%',
      verdict(within(f.small.p99Ms, l.small.p99Ms)),
    ])
    if (soak.warmUp) {
      rows.push([
        `soak: the warm-up before it (${soak.warmUpSeconds} s at the same rates, not in the minutes): applied; small requests p50 / p99`,
        `${n(soak.warmUp.appliedPerSecond)} objects/s; ${soak.warmUp.small.p50Ms} / ${soak.warmUp.small.p99Ms} ms`,
        '',
        '',
      ])
    }
    rows.push(['soak: small requests p99 each minute (ms)', soak.minutes.map((m) => Math.round(m.small.p99Ms)).join(' / '), '', ''])
    rows.push(['soak: cores in use each minute, API / worker / Postgres / idle', soak.minutes.map((m) => `${m.cores.api}/${m.cores.worker}/${m.cores.postgres}/${m.cores.idle}`).join('  '), '', ''])
    if (soak.minutes[0]?.faultsPerSecond) {
      const faults = (m: (typeof soak.minutes)[number]) => `${n(m.faultsPerSecond!.worker)}/${n(m.faultsPerSecond!.postgres)}`
      rows.push(['soak: minor page faults a second each minute, worker / Postgres', soak.minutes.map(faults).join('  '), '', ''])
    }
    if (soak.minutes[0]?.postgres) {
      const wal = (m: (typeof soak.minutes)[number]) => `${m.postgres!.walMbPerSecond}/${n(m.postgres!.fullPageImagesPerSecond)}${m.postgres!.checkpointsBegun ? '*' : ''}`
      rows.push(['soak: Postgres WAL MB/s / full-page images a second each minute (* a checkpoint began)', soak.minutes.map(wal).join('  '), '', ''])
    }
    const share = (r: Record<string, number>) => Object.entries(r).map(([k, v]) => `${k} ${Math.round(v * 100)}%`).join(', ')
    rows.push([
      'soak: mixed requests accepted; all applied after the last send',
      `${n(soak.mixedAccepted)} of ${n(soak.mixedRequests)}; ${soak.allDoneAfterLastSendMs === null ? 'not all' : `${n(soak.allDoneAfterLastSendMs)} ms`}`,
      'all; < 5 s (below capacity)',
      verdict(soak.mixedAccepted === soak.mixedRequests && soak.allDoneAfterLastSendMs !== null && soak.allDoneAfterLastSendMs < 5000),
    ])
    rows.push(['soak: dead-row share before it (left by earlier runs)', share(soak.deadRowShareAtStart), '', ''])
    rows.push(['soak: dead-row share, highest sampled during it (every 30 s)', share(soak.deadRowShareMax), '', ''])
    rows.push(['soak: dead-row share once all applied', share(soak.deadRowShareLast), '', ''])
    rows.push(['soak: every object exact', soak.check.exact ? 'exact' : `${n(soak.check.mismatches)} mismatches`, 'exact', verdict(soak.check.exact)])
  }
  if (lull) {
    const each = (f: (b: Lull['bursts'][number]) => string) => lull!.bursts.map(f).join(' / ')
    const burst = `${lull.bursts.length} mixed bursts of ${n(lull.bursts[0]?.objects ?? 0)} objects, each after ${lull.lullSeconds} s of nothing`
    rows.push([`lull: ${burst}: applied`, each((b) => (b.appliedPerSecond === null ? '-' : n(b.appliedPerSecond))) + ' objects/s', '', ''])
    rows.push([`lull: Postgres CPU seconds per 1,000 objects, each burst`, each((b) => String(b.cpuPerThousand.postgres)), '', ''])
    rows.push([`lull: Postgres minor page faults per 1,000 objects, each burst`, each((b) => n(b.faultsPerThousand.postgres)), '', ''])
    rows.push([`lull: every object exact`, lull.check.exact ? 'exact' : `${n(lull.check.mismatches)} mismatches`, 'exact', verdict(lull.check.exact)])
  }
  for (const i of identity) {
    const events = `${n(i.preloaded.events)} events`
    for (const p of [i.merges, i.deletes]) {
      const what = p === i.merges ? 'merges' : 'deletes'
      rows.push([
        `identity: ${what}/s, requests of 50, ${events}`,
        `${n(p.operationsPerSecond)} ops/s${p.capped ? ` (capped: ${n(p.operationsDone)} of ${n(p.operations)} done)` : ''}`,
        '>= 333 ops/s',
        verdict(p.operationsPerSecond >= 333),
      ])
    }
    rows.push([`identity: accepted -> done of one merge at rest, ${events}`, `p99 ${i.singleMerge.p99Ms} ms`, '', ''])
  }
  if (identity.length === 2) {
    for (const k of ['merges', 'deletes'] as const) {
      const [a, b] = identity.map((i) => i[k].operationsPerSecond)
      const spread = Math.max(a, b) ? Math.abs(a - b) / Math.max(a, b) : 0
      rows.push([`identity: ${k} at both sizes, difference`, `${Math.round(spread * 100)}%`, 'within 20%', verdict(spread <= 0.2)])
    }
  }
  if (sweep) {
    const a = sweep.acceptedToDone
    rows.push([
      `split: accepted -> done at ${a.rps} requests/s while the history sweep squashes ${n(sweep.operations.merges)} merges and erases ${n(sweep.operations.deletes)} users`,
      `p50 ${a.p50Ms} ms, p99 ${a.p99Ms} ms, max ${a.maxMs} ms; sweep ${sweep.sweepSeconds === null ? 'not seen' : `${sweep.sweepSeconds} s`}`,
      'p99 < 250 ms',
      verdict(a.p99Ms < 250 && a.failedApplying === 0 && sweep.sweepSeconds !== null),
    ])
  }
  if (segments) {
    const sized = `${segments.segmentSize === null ? '?' : n(segments.segmentSize)}-member segment`
    rows.push([`split: segment size of a ${sized} at ${segments.rps}/s, at rest`, `p50 ${segments.atRest.p50Ms} ms, p99 ${segments.atRest.p99Ms} ms; ${segments.atRest.failures} failed`, '', ''])
    rows.push([
      `split: segment size of a ${sized} while ${n(segments.backlogObjects)} objects drain, ${segments.drains?.length ?? 1} times (${segments.secondsWhileDraining} s)`,
      `p50 ${segments.duringDrain.p50Ms} ms, p99 ${segments.duringDrain.p99Ms} ms of ${segments.duringDrain.count} reads; ${segments.duringDrain.failures} failed` +
        (segments.drains ? `; slowest of each drain ${segments.drains.map((d) => d.slowestMs).join(' / ')} ms` : ''),
      'p99 < 250 ms (aim 100)',
      verdict(segments.duringDrain.p99Ms < 250 && segments.duringDrain.failures === 0),
    ])
  }
  for (const e of exports) rows.push([`export of ${n(e.users)} users`, `${n(e.usersPerSecond)} users/s`, `peak RSS ${e.peakRssMb} MiB`, ''])
  if (reads) {
    rows.push(['/subscription/status/get (10 keys)', `${n(reads.subscriptionGet.requestsPerSecond)} req/s`, `p99 ${reads.subscriptionGet.p99Ms} ms`, ''])
    rows.push(['/users/export/ids (10 users)', `${n(reads.exportIds.requestsPerSecond)} req/s`, `p99 ${reads.exportIds.p99Ms} ms`, ''])
  }

  const width = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length)))
  console.log(rows.map((r) => r.map((c, i) => c.padEnd(width[i])).join('  ').trimEnd()).join('\n'))
  const dir = path.join(root, 'bench/results')
  mkdirSync(dir, { recursive: true })
  const file = path.join(dir, `${startedAt.replace(/[:.]/g, '-')}.json`)
  Object.assign(out, { raw, rawMixed, preloads, ...ingestOut, mixed: mixed && { ...mixed, floor: mixedFloor }, pool: poolOut, soak, lull, identity, sweep, segments, reads, exports, partSeconds, table: rows })
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`)
  console.log(`\nwritten to ${path.relative(root, file)}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
