// Imported into a service process (`BENCH_NODE_FLAGS="--import=$PWD/bench/allocation-profile.mjs"`):
// samples every allocation, also of objects the garbage collector has since freed (what
// `--heap-prof` leaves out: it keeps only what is still alive at exit), and on SIGTERM writes the
// profile to $BENCH_ALLOC_PROF/<role>-<pid>.heapprofile (open it in Chrome DevTools, Memory tab).
import { mkdirSync, writeFileSync } from 'node:fs'
import inspector from 'node:inspector'
import path from 'node:path'

const dir = process.env.BENCH_ALLOC_PROF ?? '.'
const role = process.argv.includes('worker') ? 'worker' : 'api'
const session = new inspector.Session()
session.connect()
session.post('HeapProfiler.startSampling', { samplingInterval: 32768, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
// Ahead of the service's own SIGTERM handler; the post answers synchronously on the main thread.
process.prependOnceListener('SIGTERM', () => {
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) return
    mkdirSync(dir, { recursive: true })
    writeFileSync(path.join(dir, `${role}-${process.pid}.heapprofile`), JSON.stringify(result.profile))
  })
})
