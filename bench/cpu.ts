// CPU seconds the service's processes spend on a part, read from /proc: a cost per object that
// moves far less with the machine's other load than throughput does, so two codes measured in
// one session can be told apart by a few percent; and the cores in use in each phase of the part,
// which say whether the machine was full (then only less CPU per object makes it faster).
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { nearest } from './lib.js'
import { round } from './load.js'

/** USER_HZ: /proc counts CPU time in ticks of 1/100 s on Linux. */
const TICKS_PER_SECOND = 100

/** The fields of a /proc stat file after the command name, and that name; undefined once the process or thread is gone. */
function readStat(file: string): { name: string; fields: string[] } | undefined {
  try {
    const s = readFileSync(file, 'utf8')
    return { name: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')), fields: s.slice(s.lastIndexOf(')') + 2).split(' ') }
  } catch {
    return undefined
  }
}

const statFields = (pid: number) => readStat(`/proc/${pid}/stat`)?.fields

/** What a stat's fields say of a process: CPU seconds (user and system) and minor page faults. */
interface Usage {
  seconds: number
  faults: number
}

/** A process's usage; with `reaped`, also that of its children that have exited. */
function usageOf(pid: number, reaped = false): Usage {
  const f = statFields(pid)
  if (!f) return { seconds: 0, faults: 0 }
  return {
    seconds: (Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0)) / TICKS_PER_SECOND,
    faults: Number(f[7]) + (reaped ? Number(f[8]) : 0),
  }
}

const plus = (a: Usage, b: Usage): Usage => ({ seconds: a.seconds + b.seconds, faults: a.faults + b.faults })

/** A process tree's usage: the root's, its exited children's, and its live children's (a Postgres server and its backends). */
function treeUsage(root: number): Usage {
  let total = usageOf(root, true)
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    if (statFields(pid)?.[1] === String(root)) total = plus(total, usageOf(pid))
  }
  return total
}

/** User and system ticks of a stat's fields, in seconds. */
const ownSeconds = (f: string[]) => (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND

/**
 * A process's CPU seconds by kind of thread: its main thread (the event loop), `node` (the
 * threads Node names so: V8's helpers, which do most of the garbage collector's work, and libuv's
 * pool), `merges` (the embedded ClickHouse's background merges) and `engine` (its other threads).
 * A thread that ended before the reading is not in it.
 */
export function threadSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = { main: 0, node: 0, merges: 0, engine: 0 }
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return out
  }
  for (const tid of tids) {
    const stat = readStat(`/proc/${pid}/task/${tid}/stat`)
    if (!stat) continue
    const kind = tid === String(pid) ? 'main' : stat.name === 'node' ? 'node' : stat.name === 'MergeMutate' ? 'merges' : 'engine'
    out[kind] += ownSeconds(stat.fields)
  }
  return out
}

/** Processes to meter: single processes by pid, process trees by their root's pid. */
export interface Metered {
  processes: Record<string, number[]>
  trees: Record<string, number | undefined>
}

function reading(m: Metered): Record<string, Usage> {
  const out: Record<string, Usage> = {}
  for (const [name, pids] of Object.entries(m.processes)) out[name] = pids.map((pid) => usageOf(pid)).reduce(plus, { seconds: 0, faults: 0 })
  for (const [name, root] of Object.entries(m.trees)) if (root !== undefined) out[name] = treeUsage(root)
  return out
}

/** Seconds the machine's CPUs sat idle, all of them together (idle and iowait in /proc/stat). */
function idleSeconds(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/)
  return (Number(fields[4]) + Number(fields[5])) / TICKS_PER_SECOND
}

/** Cores in use over a span: each group's, `other` (the rest of the machine: Redis, the load generator) and `idle`. */
export type Cores = Record<string, number>

/** Each group's CPU seconds per 1,000 objects, as the bench prints them: `api 0.023, worker 0.058, ...`. */
export const perThousandObjects = (cpuSeconds: Record<string, number>, objects: number) =>
  Object.entries(cpuSeconds)
    .map(([name, seconds]) => `${name} ${((seconds * 1000) / objects).toFixed(3)}`)
    .join(', ')

/**
 * Starts metering, reading every `everyMs` (a reading walks /proc, so not much more often than
 * once a second) so that the phases of a part can be told apart afterwards: `coresBetween`
 * answers the cores in use from the reading nearest one performance.now() instant to the one
 * nearest another (whether the cores were full while accepting, while draining), `stop` each
 * group's CPU seconds since the start, and `faults` after it each group's minor page faults.
 */
export function meterCpu(
  m: Metered,
  everyMs = 1000,
): {
  stop(): Record<string, number>
  faults(): Record<string, number>
  coresBetween(from: number, to: number): Cores
  faultsPerSecondBetween(from: number, to: number): Record<string, number>
} {
  const readings: { at: number; usage: Record<string, Usage>; idle: number }[] = []
  const read = () => readings.push({ at: performance.now(), usage: reading(m), idle: idleSeconds() })
  read()
  const timer = setInterval(read, everyMs)
  /** The readings nearest two instants and the seconds between them; undefined when they are the same. */
  const window = (from: number, to: number) => {
    const [a, b] = [nearest(readings, (r) => r.at, from), nearest(readings, (r) => r.at, to)]
    const span = (b.at - a.at) / 1000
    return span > 0 ? { a, b, span } : undefined
  }
  /** Each group's growth of one field from the first reading to the last. */
  const since = (field: keyof Usage) => {
    const [first, last] = [readings[0], readings[readings.length - 1]]
    return Object.fromEntries(Object.entries(last.usage).map(([name, u]) => [name, round(u[field] - first.usage[name][field])]))
  }
  return {
    stop() {
      clearInterval(timer)
      read()
      return since('seconds')
    },
    faults: () => since('faults'),
    coresBetween(from, to) {
      const w = window(from, to)
      if (!w) return {}
      const { a, b, span } = w
      const cores: Cores = {}
      let used = 0
      for (const name of Object.keys(b.usage)) {
        cores[name] = round((b.usage[name].seconds - a.usage[name].seconds) / span)
        used += cores[name]
      }
      cores.idle = round((b.idle - a.idle) / span)
      cores.other = round(os.cpus().length - used - cores.idle)
      return cores
    },
    faultsPerSecondBetween(from, to) {
      const w = window(from, to)
      if (!w) return {}
      const { a, b, span } = w
      return Object.fromEntries(Object.keys(b.usage).map((name) => [name, Math.round((b.usage[name].faults - a.usage[name].faults) / span)]))
    },
  }
}

/**
 * CPU microseconds one minor page fault costs on this machine: fresh memory touched a page at a
 * time (median of three 64 MiB rounds). On bare metal ~1 us; on the VM the benchmarks run on
 * 12-14, which makes memory a process gives back and takes again a cost of its own.
 */
export function pageFaultMicros(): number {
  const size = 64 * 1024 * 1024
  const rounds = [0, 1, 2].map(() => {
    const fresh = Buffer.allocUnsafeSlow(size)
    const faults = Number(statFields(process.pid)![7])
    const cpu = process.cpuUsage()
    for (let i = 0; i < size; i += 4096) fresh[i] = 1
    const used = process.cpuUsage(cpu)
    return (used.user + used.system) / Math.max(1, Number(statFields(process.pid)![7]) - faults)
  })
  return round(rounds.sort((a, b) => a - b)[1])
}
