import { readFileSync } from 'node:fs'

/** The fields of /proc/<pid>/stat (or a thread's) from the state on (index 0 is field 3), past the command name. */
export function statFields(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  return text.slice(text.lastIndexOf(') ') + 2).split(' ')
}

/** Running, not a zombie left for a parent that is gone. */
export function alive(pid: number): boolean {
  try {
    return statFields(`/proc/${pid}/stat`)[0] !== 'Z'
  } catch {
    return false
  }
}

/** The pids of a process's children. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}
