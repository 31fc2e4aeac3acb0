// How the service's processes are started: by `make run` (run-local.ts), the npm scripts
// (start.ts) and the benchmarks' layouts, which mirror them.
import { spawnSync } from 'node:child_process'
import path from 'node:path'

/**
 * The command that starts the worker process under `make run` at a lower CPU priority, so that the
 * API wins the cores when both want them; from exec on, so every thread inherits it (chDB's and
 * libuv's too, not only the main thread as a change after spawn would). The idle scheduling class
 * (`chrt --idle 0`, util-linux): a thread of it runs only on a core no other thread wants. Nice 10
 * does not do that on Linux's scheduler since 6.6 (EEVDF): at 1,000 small requests a second the
 * API's main thread still waited in the run queue 0.6 of the time it ran. Where chrt is missing
 * (not Linux), nice 10.
 */
export function workerPriority(): string[] {
  const chrt = spawnSync('chrt', ['--version'], { stdio: 'ignore' })
  return chrt.status === 0 ? ['chrt', '--idle', '0'] : ['nice', '-n', '10']
}

/**
 * V8 flags of every service process: a 64 MiB young generation instead of 16. A batch's or a
 * request's objects live across several awaits; with the default they outlive scavenges and
 * are copied and promoted.
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=64']

/**
 * Memory allocator settings of every service process; an operator's own value of either variable
 * wins. Memory a process hands back to the OS is faulted in again page by page when it is next
 * used, and on the VM the benchmarks run on a page fault costs 12-21 us of CPU: without these
 * settings, a quarter of the worker's CPU under the mixed load.
 * - glibc (Node's buffers, strings passed to native code): blocks below 32 MiB come from the heap
 *   rather than from an mmap of their own unmapped on free, and the heap is not trimmed below 1 GiB.
 * - the embedded engine's jemalloc (libchdb): freed pages are kept 30 s instead of ClickHouse's 5.
 */
export const SERVICE_ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864',
  JE_MALLOC_CONF: 'dirty_decay_ms:30000',
}

/** A service process's environment: the allocator settings under `env`. */
export const serviceProcessEnv = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...SERVICE_ALLOCATOR_ENV, ...env })

const MAIN = path.join(import.meta.dirname, 'main.ts')
const EXIT_WITH_PARENT = path.join(import.meta.dirname, 'exit-with-parent.ts')

/**
 * The command line of a service process started by a launcher (`main.ts <args>`): the loader flags
 * the launcher was started with (tsx), the service's Node flags, and an exit when the launcher dies.
 */
export const serviceCommand = (args: string[]): string[] => [process.execPath, ...process.execArgv, ...SERVICE_NODE_FLAGS, '--import', EXIT_WITH_PARENT, MAIN, ...args]
