// Before and after in one sitting: bench/run.ts's parts (BENCH_PARTS, default mixed) for this tree
// and a baseline, alternated on one preload, so drift of the machine and of the reused preload falls
// on both alike. Usage: tsx bench/alternate.ts <baseline: a commit or a checkout> [rounds = 3].
// A commit is checked out as a git worktree (node_modules linked), removed at the end. Odd rounds
// run this tree first, even rounds the baseline first. Prints a line per run and the means.
// A baseline whose schema this tree's migrations change (a table dropped, say) cannot share the
// preload once this tree has migrated it: BENCH_BASELINE_PRELOAD_DIR and BENCH_BASELINE_PRELOAD_DB
// give the baseline a preload of its own (built by its service's migrations on first use).
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { perThousandObjects } from './cpu.js'
import { root } from './lib.js'

interface Figures {
  mixed?: number
  mixedRatio?: number
  mixedCpu?: string
  split?: number
  embedded?: number
  smallP99?: number
  drainingP99?: number
  doneP99?: number
  /** Postgres CPU seconds per 1,000 objects in the lull part's bursts after the first. */
  lullPostgres?: number
  /** Merges and deletes applied a second, on the full preload. */
  identityMerges?: number
  identityDeletes?: number
  /** Segment-size reads while a backlog drains, p99. */
  segmentP99?: number
}

/** A checkout of `base`: the directory itself, or a worktree of the commit it names. */
function checkout(base: string): { dir: string; remove(): void } {
  if (existsSync(base)) return { dir: path.resolve(base), remove() {} }
  const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'uds-baseline-')), 'tree')
  execFileSync('git', ['worktree', 'add', '--detach', dir, base], { cwd: root, stdio: 'ignore' })
  symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'))
  return { dir, remove: () => execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: root, stdio: 'ignore' }) }
}

/** One bench/run.ts with the service from `serviceRoot`; answers the results file it wrote. */
async function runOnce(serviceRoot: string | undefined): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_REUSE_PRELOAD: '1', BENCH_PARTS: process.env.BENCH_PARTS ?? 'mixed' }
  if (serviceRoot) {
    env.BENCH_SERVICE_ROOT = serviceRoot
    if (process.env.BENCH_BASELINE_PRELOAD_DIR) env.BENCH_PRELOAD_DIR = process.env.BENCH_BASELINE_PRELOAD_DIR
    if (process.env.BENCH_BASELINE_PRELOAD_DB) env.BENCH_PRELOAD_DB = process.env.BENCH_BASELINE_PRELOAD_DB
  } else delete env.BENCH_SERVICE_ROOT
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  const code = await new Promise((r) => child.once('exit', r))
  const written = /written to (\S+)/.exec(out)
  if (code !== 0 || !written) throw new Error(`bench/run.ts failed (${code}): ${out.slice(-2000)}`)
  return path.join(root, written[1])
}

function figuresOf(file: string): Figures {
  const r = JSON.parse(readFileSync(file, 'utf8'))
  return {
    mixed: r.mixed?.appliedPerSecond,
    mixedRatio: r.mixed?.floor?.ratio,
    mixedCpu: r.mixed?.cpuSeconds ? perThousandObjects(r.mixed.cpuSeconds, r.mixed.objects) : undefined,
    embedded: r.embedded?.appliedPerSecond,
    split: r.split?.appliedPerSecond,
    smallP99: r.split?.smallRequests?.p99Ms,
    drainingP99: r.split?.duringDrain?.p99Ms,
    doneP99: r.split?.acceptedToDone?.p99Ms,
    lullPostgres: lullPostgres(r.lull?.bursts),
    identityMerges: r.identity?.at(-1)?.merges?.operationsPerSecond,
    identityDeletes: r.identity?.at(-1)?.deletes?.operationsPerSecond,
    segmentP99: r.segments?.duringDrain?.p99Ms,
  }
}

function lullPostgres(bursts?: { cpuPerThousand: { postgres: number } }[]): number | undefined {
  const after = bursts?.slice(1).map((b) => b.cpuPerThousand.postgres)
  return after?.length ? Math.round((after.reduce((a, b) => a + b, 0) / after.length) * 10_000) / 10_000 : undefined
}

const show = (f: Figures) =>
  Object.entries(f)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k} ${typeof v === 'number' ? v.toLocaleString('en-US') : v}`)
    .join(' | ')

async function main() {
  const [base, roundsArg] = process.argv.slice(2)
  if (!base) throw new Error('usage: tsx bench/alternate.ts <baseline commit or checkout> [rounds]')
  const rounds = Number(roundsArg ?? 3)
  const baseline = checkout(base)
  const runs: { variant: 'this tree' | 'baseline'; figures: Figures }[] = []
  try {
    for (let round = 1; round <= rounds; round++) {
      const order: ('this tree' | 'baseline')[] = round % 2 ? ['this tree', 'baseline'] : ['baseline', 'this tree']
      for (const variant of order) {
        const file = await runOnce(variant === 'baseline' ? baseline.dir : undefined)
        const figures = figuresOf(file)
        runs.push({ variant, figures })
        console.log(`round ${round}, ${variant}: ${show(figures)} (${path.relative(root, file)})`)
      }
    }
  } finally {
    baseline.remove()
  }
  for (const variant of ['this tree', 'baseline'] as const) {
    const mine = runs.filter((r) => r.variant === variant).map((r) => r.figures)
    const mean = (k: keyof Figures) => {
      const xs = mine.map((f) => f[k]).filter((x): x is number => typeof x === 'number')
      return xs.length ? Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 1000) / 1000 : undefined
    }
    console.log(`mean, ${variant}: ${show({ mixed: mean('mixed'), mixedRatio: mean('mixedRatio'), embedded: mean('embedded'), split: mean('split'), smallP99: mean('smallP99'), drainingP99: mean('drainingP99'), doneP99: mean('doneP99'), lullPostgres: mean('lullPostgres'), identityMerges: mean('identityMerges'), identityDeletes: mean('identityDeletes'), segmentP99: mean('segmentP99') })}`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
