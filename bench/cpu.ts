// CPU seconds the service's processes spend on a part, read from /proc: a cost per object that
// moves far less with the machine's other load than throughput does, so two codes measured in
// one session can be told apart by a few percent.
import { readdirSync, readFileSync } from 'node:fs'

/** USER_HZ: /proc counts CPU time in ticks of 1/100 s on Linux. */
const TICKS_PER_SECOND = 100

function statFields(pid: number): string[] | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return s.slice(s.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** User and system time of a process (all its threads); with `reaped`, also that of its children that have exited. */
function cpuSeconds(pid: number, reaped = false): number {
  const f = statFields(pid)
  if (!f) return 0
  const ticks = Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0)
  return ticks / TICKS_PER_SECOND
}

/** A process tree's CPU: the root's, its exited children's, and its live children's (a Postgres server and its backends). */
function treeSeconds(root: number): number {
  let total = cpuSeconds(root, true)
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    if (statFields(pid)?.[1] === String(root)) total += cpuSeconds(pid)
  }
  return total
}

/** Processes to meter: single processes by pid, process trees by their root's pid. */
export interface Metered {
  processes: Record<string, number[]>
  trees: Record<string, number | undefined>
}

function reading(m: Metered): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [name, pids] of Object.entries(m.processes)) out[name] = pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
  for (const [name, root] of Object.entries(m.trees)) if (root !== undefined) out[name] = treeSeconds(root)
  return out
}

/** Starts metering; the function returned answers each group's CPU seconds since. */
export function meterCpu(m: Metered): () => Record<string, number> {
  const before = reading(m)
  return () => {
    const after = reading(m)
    return Object.fromEntries(Object.entries(after).map(([name, s]) => [name, Math.round((s - before[name]) * 100) / 100]))
  }
}
