// A sender that sends in bursts: the mixed load (bench/mixed-load.ts) in BENCH_LULL_BURSTS bursts
// (default 4) of 300 requests (67,500 objects), each after BENCH_LULL_SECONDS (default 15) of
// nothing, under `make run`'s layout on the preloaded database; every object checked after. A lull
// longer than a connection pool's idle timeout closes the service's Postgres connections, and the
// backends opened for the next burst pay again for every shared buffer they touch. Reported per
// burst: applied objects/s, CPU seconds and minor page faults per 1,000 objects of each process.
// Usage: tsx bench/lull.ts. Prints one JSON line.
import { setTimeout as sleep } from 'node:timers/promises'
import { meterCpu } from './cpu.js'
import { fullLoad } from './load.js'
import { before, startMixed, stopAndCheck } from './mixed.js'
import { expected, MIXED_PER_KIND, mixedBody, mixedUsers } from './mixed-load.js'
import { benchPostmasterPid } from './postgres.js'
import { readPreloaded } from './preload.js'

const BURSTS = Number(process.env.BENCH_LULL_BURSTS ?? 4)
const LULL_SECONDS = Number(process.env.BENCH_LULL_SECONDS ?? 15)
const PER_BURST = 300

const perThousand = (values: Record<string, number>, objects: number, digits: number) =>
  Object.fromEntries(Object.entries(values).map(([name, v]) => [name, Number(((v * 1000) / objects).toFixed(digits))]))

async function main() {
  const preloaded = readPreloaded()
  // Another seed than the mixed part's, so the bursts do not only touch what it warmed.
  const requests = mixedUsers(BURSTS * PER_BURST, 23)
  const e = expected(requests)
  const run = await startMixed(preloaded)
  const prior = await before(run, preloaded, e)
  const bursts = []
  for (let b = 0; b < BURSTS; b++) {
    await sleep(LULL_SECONDS * 1000)
    const bodies = requests.slice(b * PER_BURST, (b + 1) * PER_BURST).map((r, i) => mixedBody(r, b * PER_BURST + i, run.tag))
    const objects = bodies.length * MIXED_PER_KIND * 3
    const cpu = meterCpu({ processes: run.layout.pids(), trees: { postgres: benchPostmasterPid() } })
    const { figures } = await fullLoad(run.t, bodies, { concurrency: 32, objects, deadlineMs: 600_000 })
    const seconds = cpu.stop()
    bursts.push({
      objects,
      appliedPerSecond: figures.appliedPerSecond,
      failedRequests: figures.failedRequests,
      cpuPerThousand: perThousand(seconds, objects, 4),
      faultsPerThousand: perThousand(cpu.faults(), objects, 0),
    })
  }
  const checked = await stopAndCheck(run, preloaded, e, prior)
  console.log(JSON.stringify({ mode: 'lull', layout: 'split', lullSeconds: LULL_SECONDS, bursts, check: checked, setupSeconds: run.setupSeconds }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
